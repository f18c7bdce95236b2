package redisstore

import (
	_ "embed"
	"fmt"
	"math"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// replyReader reads the decide script's packed reply: little-endian doubles, each
// an integer.
type replyReader struct {
	b   string
	pos int
	bad bool
}

func (r *replyReader) next() int64 {
	if r.pos+8 > len(r.b) {
		r.bad = true
		return 0
	}
	b := r.b[r.pos : r.pos+8]
	u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	v := math.Float64frombits(u)
	r.pos += 8
	return int64(v)
}

// parseReply turns the decide script's reply into Decisions, choosing the reported
// window exactly as window.Check and window.Report do.
func parseReply(res any, hits []ratelimit.Hit, out []ratelimit.Decision, wantOld bool) (bool, taken, error) {
	var packed string
	var olds []any
	switch v := res.(type) {
	case string:
		packed = v
	case []any:
		if len(v) > 0 {
			packed, _ = v[0].(string)
			olds = v[1:]
		}
	}
	r := replyReader{b: packed}
	allowed := r.next() == 1
	at := r.next()
	// existed[i]: hit i's key existed (kept only when a refund may need it).
	var existed []bool
	if wantOld {
		existed = make([]bool, len(hits))
	}
	for i, h := range hits {
		l := h.Limit
		d := ratelimit.Decision{}
		counted := r.next() == 1
		never, marker := penaltyMarker(int(r.next()))
		if e := r.next() == 1; wantOld {
			existed[i] = e
		}
		n := l.Windows()
		var ok [8]bool
		var ra, rem, reset [8]int64
		okS, raS, remS, resetS := ok[:0], ra[:0], rem[:0], reset[:0]
		for range n {
			okS = append(okS, r.next() == 1)
			raS = append(raS, r.next())
			remS = append(remS, r.next())
			resetS = append(resetS, r.next())
		}
		switch {
		case never > 0:
			d = ratelimit.Decision{Never: true, Window: never - 1}
		default:
			d.Allowed = true
			longest := int64(-1)
			for w := range n {
				if okS[w] {
					continue
				}
				d.Allowed = false
				if raS[w] > longest {
					longest, d.Window = raS[w], w
				}
			}
			if !d.Allowed {
				d.RetryAfter = time.Duration(longest) * ratelimit.Tick
			}
		}
		if d.Allowed {
			best := -1.0
			for w := range n {
				frac := float64(remS[w]) / float64(l.Params(w).Capacity)
				if best < 0 || frac < best {
					best, d.Window = frac, w
				}
			}
		}
		d.Counted = counted
		d.Limit = l.Params(d.Window).Capacity
		if !r.bad {
			d.Remaining = remS[d.Window]
			d.Reset = time.Duration(resetS[d.Window]) * ratelimit.Tick
		}
		applyPenalty(h, marker, &d)
		out[i] = d
	}
	r.readDelays(out, len(hits))
	if r.bad || r.pos != len(packed) {
		return false, taken{}, fmt.Errorf("script reply of %d bytes does not match %d hits", len(packed), len(hits))
	}
	if !wantOld {
		return allowed, taken{at: at}, nil
	}
	if len(olds) != 2*len(hits) {
		return false, taken{}, fmt.Errorf("short script reply (%d old values for %d hits)", len(olds), len(hits))
	}
	ws := make([]written, len(hits))
	for i := range hits {
		old, _ := olds[2*i].(string)
		nw, _ := olds[2*i+1].(string)
		ws[i] = written{counted: out[i].Counted, old: old, oldOK: existed[i], new: nw}
	}
	return allowed, taken{at: at, keys: ws}, nil
}
