package window

import (
	"math"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// State is the state of one window of one key. Every algorithm's state type
// implements it with pointer receivers; all methods take the window's Params
// and the decision instant now in ticks. allow, remaining and Expiry never
// change the state. The methods assume 1 ≤ cost ≤ p.Capacity; callers
// handle larger costs (see Check).
//
// Only this package's states implement it: deciding, counting and
// reporting go through the engine (Check, Take, Report, Usage), so those
// methods are unexported. Init and Expiry stay exported because a store
// calls them on a single state it holds (the memory store's expiry on
// every lookup, the Redis store's reply decoding).
type State interface {
	// Init makes the state that of a key never seen before, at now.
	Init(p *ratelimit.Params, now int64)
	// allow reports whether cost units would be admitted at now and, if
	// not, the wait in ticks (≥ 1) after which they would be (0 when
	// unknown, as for Concurrency).
	allow(p *ratelimit.Params, now, cost int64) (ok bool, retryAfter int64)
	// take counts cost units at now.
	take(p *ratelimit.Params, now, cost int64)
	// remaining returns the units left at now, in 0..p.Capacity.
	remaining(p *ratelimit.Params, now int64) int64
	// Expiry returns the first instant at which the state is
	// indistinguishable from a fresh one (Init), so a store may drop it
	// then; math.MaxInt64 when it never expires by itself.
	Expiry(p *ratelimit.Params) int64
}

// StatePtr constrains a type parameter to a pointer to a state type S that
// implements State; it lets Check, Take and Report work on a []S without
// allocating.
type StatePtr[S any] interface {
	*S
	State
}

// resetOf returns the Reset of window w at now in ticks: the RetryAfter of
// a request of cost Remaining+1, or 0 when Remaining equals the capacity
// (nothing to give back) — see ARCHITECTURE.md.
func resetOf(w State, p *ratelimit.Params, now int64) int64 {
	return resetFrom(w, p, now, w.remaining(p, now))
}

// resetFrom is resetOf for a window whose Remaining at now is r (computed
// once by a caller that reports it too: for a sliding counter it sums
// every bucket).
func resetFrom(w State, p *ratelimit.Params, now, r int64) int64 {
	return resetAfter(p, r, func(cost int64) (bool, int64) { return w.allow(p, now, cost) })
}

// resetAfter is the one copy of the Reset rule: the wait allow reports
// for a request of cost r+1, where r is the window's Remaining, or 0
// when r is the capacity (nothing to give back) or that request would be
// admitted now. It takes the window's allow as a function, not a State,
// so that a caller on a concrete state (reported) keeps it on the
// stack: small enough to be inlined, its closure is called directly,
// where a State interface or a type parameter's method (called through
// the instantiation's dictionary) would move the state to the heap.
func resetAfter(p *ratelimit.Params, r int64, allow func(cost int64) (bool, int64)) int64 {
	if r >= p.Capacity {
		return 0
	}
	if ok, ra := allow(r + 1); !ok {
		return ra
	}
	return 0
}

// Check decides a hit of cost at now against states (states[i] is window
// i of l) without changing them. It sets d.Allowed, d.Never, d.RetryAfter
// and d.Window and clears the other fields. A cost above a window's
// capacity is denied with Never set. Otherwise the hit is allowed iff every
// window allows it; RetryAfter is the longest among the denying windows and
// Window that window (the first one on ties).
func Check[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now, cost int64, d *ratelimit.Decision) {
	*d = ratelimit.Decision{Allowed: true}
	var longest int64 = -1
	for i := range states {
		p := l.ParamsOf(i)
		if cost > p.Capacity {
			*d = ratelimit.Decision{Never: true, Window: i}
			return
		}
		ok, ra := P(&states[i]).allow(p, now, cost)
		if ok {
			continue
		}
		d.Allowed = false
		if ra > longest {
			longest = ra
			d.Window = i
		}
	}
	if !d.Allowed {
		d.RetryAfter = time.Duration(longest) * ratelimit.Tick
	}
}

// Take counts cost at now in every window of states.
func Take[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now, cost int64) {
	for i := range states {
		P(&states[i]).take(l.ParamsOf(i), now, cost)
	}
}

// Report completes a Decision made by Check, after the hit was counted or
// not: it sets Limit, Remaining and Reset of the reported window, choosing
// for an allowed hit the window with the lowest Remaining/Capacity (the
// first one on ties).
func Report[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now int64, d *ratelimit.Decision) {
	ReportChecked[S, P](l, states, now, 0, d)
}

// ReportChecked is Report for a decision that Check made for a hit of cost
// on these states at now, with the states unchanged since (a denial counts
// nothing). A denial's Reset is the RetryAfter of a request of cost
// Remaining+1: when that is the hit's own cost (a hit of 1 at Remaining 0,
// the common denial), it is the RetryAfter Check found for the reported
// window, which for a sliding counter was a walk over the buckets, and is
// not searched again. A cost of 0 reuses nothing: Report.
func ReportChecked[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now, cost int64, d *ratelimit.Decision) {
	if d.Allowed {
		d.Window = 0 // the only one, or the tightest below
		if len(states) > 1 {
			best := -1.0
			for i := range states {
				p := l.ParamsOf(i)
				frac := float64(P(&states[i]).remaining(p, now)) / float64(p.Capacity)
				if best < 0 || frac < best {
					best, d.Window = frac, i
				}
			}
		}
	}
	p := l.ParamsOf(d.Window)
	w := P(&states[d.Window])
	d.Limit = p.Capacity
	d.Remaining = w.remaining(p, now)
	if !d.Allowed && !d.Never && cost > 0 && d.Remaining+1 == cost && d.RetryAfter > 0 {
		d.Reset = d.RetryAfter
		return
	}
	d.Reset = time.Duration(resetFrom(w, p, now, d.Remaining)) * ratelimit.Tick
}

// Usage writes the state of every window of states at now into out
// (len(out) ≥ len(states)) without changing it. Used is Capacity −
// Remaining.
func Usage[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now int64, out []ratelimit.WindowUsage) {
	for i := range states {
		p := l.ParamsOf(i)
		w := P(&states[i])
		rem := w.remaining(p, now)
		u := ratelimit.WindowUsage{Used: p.Capacity - rem, Remaining: rem,
			Reset: time.Duration(resetFrom(w, p, now, rem)) * ratelimit.Tick}
		if i < len(l.Rates) {
			u.Rate = l.Rates[i]
		}
		out[i] = u
	}
}

// Expiry returns the instant from which every window of states is fresh.
func Expiry[S any, P StatePtr[S]](l *ratelimit.Limit, states []S) int64 {
	exp := int64(math.MinInt64)
	for i := range states {
		exp = max(exp, P(&states[i]).Expiry(l.ParamsOf(i)))
	}
	return exp
}

// Init makes every window of states fresh at now.
func Init[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now int64) {
	for i := range states {
		P(&states[i]).Init(l.ParamsOf(i), now)
	}
}

// floorDiv returns floor(a / b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilTicks converts a non-negative double tick count to int64, rounding up
// and saturating at math.MaxInt64/4 so later sums cannot overflow.
func ceilTicks(x float64) int64 {
	const limit = math.MaxInt64 / 4
	if !(x < limit) { // also catches NaN
		return limit
	}
	if x < 0 {
		return 0
	}
	return int64(math.Ceil(x))
}

// smallest returns the smallest d in [lo, hi] with ok(d), given that ok is
// monotone (false … false true … true) and ok(hi) holds, starting from a
// guess: it gallops from the guess towards the boundary and then bisects
// only the last gallop step, so a guess that is exact costs two probes
// (ok(guess) and ¬ok(guess−1)) and one that float rounding puts far off
// still costs O(log) probes. Every store finds the same d, whatever its
// search, because the answer is defined by ok alone.
func smallest(lo, hi, guess int64, ok func(int64) bool) int64 {
	guess = clamp(guess, lo, hi)
	if ok(guess) {
		hi = guess
		for step := int64(1); hi-step >= lo; step *= 2 {
			if !ok(hi - step) {
				lo = hi - step + 1
				break
			}
			hi -= step
		}
	} else {
		lo = guess + 1
		for step := int64(1); lo+step-1 < hi; step *= 2 {
			if ok(lo + step - 1) {
				hi = lo + step - 1
				break
			}
			lo += step
		}
	}
	return bisect(lo, hi, ok)
}

// maxWait is ratelimit.MaxWait in ticks: where every search for the next
// admitting instant stops.
const maxWait = int64(ratelimit.MaxWait / ratelimit.Tick)

// smallestFrom returns the smallest d in [lo, hi] with ok(d), given that
// ok is monotone, searching from a guess like smallest but without
// knowing that ok(hi) holds: it gallops up from the guess (doubling the
// step, never past hi) when ok(guess) fails, and returns hi and false
// when ok(hi) fails too. The bound is what makes it end: a state that
// never admits (a corrupted one, whose ok is always false) costs
// O(log hi) probes instead of a loop that outlives int64.
func smallestFrom(lo, hi, guess int64, ok func(int64) bool) (int64, bool) {
	guess = clamp(guess, lo, hi)
	if ok(guess) {
		return smallest(lo, guess, guess, ok), true
	}
	lo = guess + 1
	for step := int64(1); lo <= hi; step *= 2 {
		probe := min(lo+step-1, hi) // lo, step ≤ hi ≤ MaxInt64/4: no overflow
		if ok(probe) {
			return bisect(lo, probe, ok), true
		}
		lo = probe + 1
	}
	return hi, false
}

// bisect returns the smallest d in [lo, hi] with ok(d), given that ok is
// monotone, ok(hi) holds and every d < lo fails.
func bisect(lo, hi int64, ok func(int64) bool) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}
