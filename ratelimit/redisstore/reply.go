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

// next reads the next double as an integer.
func (r *replyReader) next() int64 { return int64(r.nextFloat()) }

// nextFloat reads the next double; past the end it reads 0 and marks the
// reply bad.
func (r *replyReader) nextFloat() float64 {
	if r.pos+8 > len(r.b) {
		r.bad = true
		return 0
	}
	b := r.b[r.pos : r.pos+8]
	u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	r.pos += 8
	return math.Float64frombits(u)
}

// parseReply turns the decide script's reply into Decisions, choosing the reported
// window exactly as window.Check and window.Report do. now is the instant
// the header carried (ticks; ignored with ratelimit.ClockStore, local false).
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
		if never < 0 || never > n {
			// it names the reported window: one of the limit's
			return false, taken{}, fmt.Errorf("script reply names window %d of a limit of %d as never allowing hit %d", never, n, i)
		}
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

// fullOneHit is the length of the full reply to a call of one hit on a
// one-window limit, the shortest full reply (9 doubles): every short
// reply is shorter, so a reply's length tells the two forms apart.
const fullOneHit = 9 * 8

// shortReply reads the one-hit reply of a hit its decider allowed and
// counted (lua/common.lua "Reply"): the window's state after the count,
// from which the decision follows by the arithmetic of window.Report
// (the memory store's). fixed_window's state is its count in now's window (an
// integer reply with the local clock), gcra's its TAT, token_bucket's
// its tokens and instant and sliding_window_counter's its newest bucket
// and the N+1 bucket counts (the bytes written, when they fit in a short
// reply); with the store clock the script's instant comes first. It
// returns the decision's instant and true for such a reply, false and no
// error for any other (the full form, 72 bytes or more), and an error
// for a short reply that cannot be this hit's.
func shortReply(res any, h *ratelimit.Hit, d *ratelimit.Decision, now int64, local bool) (int64, bool, error) {
	l := h.Limit
	var st [fullOneHit/8 - 1]float64 // the state's doubles
	n := 0                           // how many
	switch v := res.(type) {
	case int64:
		if !local || l.Algorithm != ratelimit.FixedWindow {
			return 0, false, fmt.Errorf("integer script reply %d for a %v limit (local clock %v)", v, l.Algorithm, local)
		}
		st[0], n = float64(v), 1
	case string:
		b := v
		if len(b) >= fullOneHit {
			return 0, false, nil
		}
		if len(b)%8 != 0 || len(b) == 0 {
			return 0, false, fmt.Errorf("script reply of %d bytes", len(b))
		}
		if !local {
			t := f64At(b, 0)
			if !(t >= 0 && t < 1<<53) || t != math.Trunc(t) {
				return 0, false, fmt.Errorf("script reply instant %v is not a tick", t)
			}
			now, b = int64(t), b[8:]
		}
		n = len(b) / 8
		for i := range n {
			st[i] = f64At(b, 8*i)
		}
	default:
		return 0, false, nil
	}
	if l.Windows() != 1 {
		return 0, false, fmt.Errorf("short script reply for a limit of %d windows", l.Windows())
	}
	integer := func(v float64) bool { return v >= 0 && v < 1<<53 && v == math.Trunc(v) }
	// The decision as window.Report makes it for a one-window limit, on
	// the concrete state by its Reported method: through Report's generic
	// code or the State interface the state would move to the heap on
	// every decision.
	p := l.ParamsOf(0)
	var rem, reset int64
	switch {
	case l.Algorithm == ratelimit.FixedWindow && n == 1:
		if _, isInt := res.(int64); local != isInt {
			return 0, false, fmt.Errorf("script reply %q for a fixed window", res)
		}
		if !integer(st[0]) {
			return 0, false, fmt.Errorf("script reply count %v is not a count", st[0])
		}
		var w window.FixedWindowState
		w.Init(p, now)
		w.Count = int64(st[0])
		rem, reset = w.Reported(p, now)
	case l.Algorithm == ratelimit.GCRA && n == 1:
		// A count was admitted: the TAT it left is at most the tolerance
		// τ = B·(W/L) past now, give or take the rounding of doubles of
		// that size (slack: a tick, and 2^-50 of their magnitude). One
		// further past is no count's, and Reset's search for it would not
		// end (the instant it looks for overflows int64).
		tau := float64(p.Capacity) * (float64(p.Window) / float64(p.Limit))
		slack := 1 + (math.Abs(float64(now))+tau)/(1<<50)
		if math.IsNaN(st[0]) || math.IsInf(st[0], 0) || !(st[0]-float64(now) <= tau+slack) {
			return 0, false, fmt.Errorf("script reply TAT %v at %d", st[0], now)
		}
		w := window.GCRAState{TAT: st[0]}
		rem, reset = w.Reported(p, now)
	case l.Algorithm == ratelimit.TokenBucket && n == 2:
		// A count was admitted: it left 0 to B tokens. A bucket far below
		// 0 is no count's, and Reset's search for its refill would not end.
		if !(st[0] >= 0 && st[0] <= float64(p.Capacity)) || !integer(st[1]) {
			return 0, false, fmt.Errorf("script reply bucket %v at %v", st[0], st[1])
		}
		w := window.TokenBucketState{Tokens: st[0], TS: int64(st[1])}
		rem, reset = w.Reported(p, now)
	case l.Algorithm == ratelimit.SlidingWindowCounter && int64(n) == p.Buckets+2:
		// The newest bucket is now's or, after the clock stepped back, a
		// later one (the count went there); every count is a sum of costs.
		newest, i := st[0], now/p.Precision
		if now < 0 && now%p.Precision != 0 {
			i-- // floor
		}
		if !integer(newest) || int64(newest) < i || newest > (1<<53)/float64(p.Precision) {
			return 0, false, fmt.Errorf("script reply newest bucket %v at %d", newest, now)
		}
		var counts [len(st) - 1]int64
		for i, c := range st[1:n] {
			// a bucket may hold a whole limit of 2^53 (ratelimit.MaxLimit)
			if !integer(c) && c != 1<<53 {
				return 0, false, fmt.Errorf("script reply bucket count %v is not a count", c)
			}
			counts[i] = int64(c)
		}
		w := window.SlidingCounterState{Newest: int64(newest), Counts: counts[:n-1]}
		rem, reset = w.Reported(p, now)
	default:
		return 0, false, fmt.Errorf("short script reply of %d values for a %v limit", n, l.Algorithm)
	}
	*d = ratelimit.Decision{Allowed: true, Counted: true, Limit: p.Capacity, Remaining: rem,
		Reset: time.Duration(reset) * ratelimit.Tick}
	return now, true, nil
}

// f64At reads the little-endian double at byte offset pos of b.
func f64At(b string, pos int) float64 {
	r := replyReader{b: b, pos: pos}
	return r.nextFloat()
}

// fixedReply reads the reply of a fixed-window header call that counted
// every hit, each in now's window (lua/common.lua "Reply"): each hit's
// count in now's window as a double, after the script's instant under
// the store clock. Each decision follows from its count by the
// arithmetic of window.Report, as a one-hit fixed window's short reply
// does. It returns the decision's instant, or an error for a reply that
// cannot be these hits' (the caller then fails the call).
func fixedReply(b string, hits []ratelimit.Hit, out []ratelimit.Decision, now int64, local bool) (int64, error) {
	integer := func(v float64) bool { return v >= 0 && v < 1<<53 && v == math.Trunc(v) }
	if !local {
		if len(b) < 8 {
			return 0, fmt.Errorf("script reply of %d bytes for %d hits", len(b), len(hits))
		}
		t := f64At(b, 0)
		if !integer(t) {
			return 0, fmt.Errorf("script reply instant %v is not a tick", t)
		}
		now, b = int64(t), b[8:]
	}
	if len(b) != 8*len(hits) {
		return 0, fmt.Errorf("script reply of %d bytes for %d counts", len(b), len(hits))
	}
	for i := range hits {
		l := hits[i].Limit
		c := f64At(b, 8*i)
		if !integer(c) || l.Algorithm != ratelimit.FixedWindow || l.Windows() != 1 {
			return 0, fmt.Errorf("script reply count %v for a %v limit", c, l.Algorithm)
		}
		p := l.ParamsOf(0)
		var w window.FixedWindowState
		w.Init(p, now)
		w.Count = int64(c)
		rem, reset := w.Reported(p, now)
		out[i] = ratelimit.Decision{Allowed: true, Counted: true, Limit: p.Capacity, Remaining: rem,
			Reset: time.Duration(reset) * ratelimit.Tick}
	}
	return now, nil
}
