package redisstore

import (
	_ "embed"
	"fmt"
	"math"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
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
// window exactly as window.Check and window.Report do. now is the instant
// the header carried (ticks; ignored with ClockStore, local false).
func parseReply(res any, hits []ratelimit.Hit, out []ratelimit.Decision, wantOld bool, now int64, local bool) (bool, taken, error) {
	if len(hits) == 1 && !wantOld {
		if at, ok, err := shortReply(res, &hits[0], &out[0], now, local); ok || err != nil {
			return ok, taken{at: at}, err
		}
	}
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

// shortReply reads the one-hit reply of a hit its decider allowed and
// counted (lua/common.lua "Reply"): the window's state after the count,
// from which the decision follows by window.Report, the memory store's
// own arithmetic. fixed_window's state is its count in now's window (an
// integer reply with the local clock), gcra's its TAT (the 8 bytes
// written); with the store clock the script's instant comes first (16
// bytes). It returns the decision's instant and true for such a reply,
// false and no error for any other (the full form), and an error for a
// short reply that cannot be this hit's.
func shortReply(res any, h *ratelimit.Hit, d *ratelimit.Decision, now int64, local bool) (int64, bool, error) {
	l := h.Limit
	var state float64 // fixed_window: the count; gcra: the TAT
	form := l.Algorithm
	switch v := res.(type) {
	case int64:
		if !local {
			return 0, false, fmt.Errorf("integer script reply %d with the store clock", v)
		}
		state, form = float64(v), ratelimit.FixedWindow
	case string:
		switch {
		case len(v) == 8 && local:
			state, form = f64At(v, 0), ratelimit.GCRA
		case len(v) == 16 && !local:
			t := f64At(v, 0)
			if !(t >= 0 && t < 1<<53) || t != math.Trunc(t) {
				return 0, false, fmt.Errorf("script reply instant %v is not a tick", t)
			}
			now, state = int64(t), f64At(v, 8)
		default:
			return 0, false, nil
		}
	default:
		return 0, false, nil
	}
	if form != l.Algorithm || l.Windows() != 1 {
		return 0, false, fmt.Errorf("short script reply does not match a %v limit of %d windows", l.Algorithm, l.Windows())
	}
	*d = ratelimit.Decision{Allowed: true}
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		if !(state >= 0 && state < 1<<53) || state != math.Trunc(state) {
			return 0, false, fmt.Errorf("script reply count %v is not a count", state)
		}
		var st [1]window.FixedWindowState
		st[0].Init(l.ParamsOf(0), now)
		st[0].Count = int64(state)
		window.Report(l, st[:], now, d)
	case ratelimit.GCRA:
		if math.IsNaN(state) || math.IsInf(state, 0) {
			return 0, false, fmt.Errorf("script reply TAT %v", state)
		}
		st := [1]window.GCRAState{{TAT: state}}
		window.Report(l, st[:], now, d)
	default:
		return 0, false, fmt.Errorf("short script reply for a %v limit", l.Algorithm)
	}
	d.Counted = true
	return now, true, nil
}

// f64At reads the little-endian double at byte offset pos of b.
func f64At(b string, pos int) float64 {
	r := replyReader{b: b, pos: pos}
	return r.nextFloat()
}
