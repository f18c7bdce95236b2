package ratelimit

import (
	"math"
	"time"
)

// Params are the constants of one window of a Limit, in ticks, as the
// algorithm math uses them. Build them with Limit.Params.
type Params struct {
	// Algorithm is the limit's algorithm.
	Algorithm Algorithm
	// Window is W in ticks (0 for Concurrency).
	Window int64
	// Limit is L, the rate's count (MaxInFlight for Concurrency).
	Limit int64
	// Capacity is the most units one request may take: the burst for the
	// bucket algorithms (default L), L otherwise, MaxInFlight for
	// Concurrency.
	Capacity int64
	// Precision is P, the sub-bucket width of SlidingWindowCounter in ticks
	// (W when the limit sets none); 0 for other algorithms.
	Precision int64
	// Buckets is N = W / P for SlidingWindowCounter; 0 otherwise.
	Buckets int64
}

// Windows returns the number of window states a key of l keeps: one per
// rate, or one for Concurrency.
func (l *Limit) Windows() int {
	if l.Algorithm == Concurrency {
		return 1
	}
	return len(l.Rates)
}

// Params returns the constants of window i of l (i ignored for
// Concurrency).
func (l *Limit) Params(i int) Params {
	if l.Algorithm == Concurrency {
		return Params{Algorithm: Concurrency, Limit: l.MaxInFlight, Capacity: l.MaxInFlight}
	}
	r := l.Rates[i]
	p := Params{
		Algorithm: l.Algorithm,
		Window:    int64(r.Window / Tick),
		Limit:     r.Limit,
		Capacity:  l.Capacity(i),
	}
	if l.Algorithm == SlidingWindowCounter {
		p.Precision = p.Window
		if l.Precision > 0 {
			p.Precision = int64(l.Precision / Tick)
		}
		p.Buckets = p.Window / p.Precision
	}
	return p
}

// param returns a pointer to Params(i): the cached one of a finished limit
// (no allocation), else a fresh copy.
func (l *Limit) param(i int) *Params {
	if i < len(l.params) {
		return &l.params[i]
	}
	p := l.Params(i)
	return &p
}

// ParamsOf returns Params(i) without copying: the cached constants of a
// finished limit (shared: callers must not modify them), else a fresh copy.
func (l *Limit) ParamsOf(i int) *Params { return l.param(i) }

// Window is the state of one window of one key. Every algorithm's state type
// implements it with pointer receivers; all methods take the window's Params
// and the decision instant now in ticks. Allow, Remaining and Expiry never
// change the state. The methods assume 1 ≤ cost ≤ p.Capacity; callers
// handle larger costs (see Check).
type Window interface {
	// Init makes the state that of a key never seen before, at now.
	Init(p *Params, now int64)
	// Allow reports whether cost units would be admitted at now and, if
	// not, the wait in ticks (≥ 1) after which they would be (0 when
	// unknown, as for Concurrency).
	Allow(p *Params, now, cost int64) (ok bool, retryAfter int64)
	// Take counts cost units at now.
	Take(p *Params, now, cost int64)
	// Remaining returns the units left at now, in 0..p.Capacity.
	Remaining(p *Params, now int64) int64
	// Expiry returns the first instant at which the state is
	// indistinguishable from a fresh one (Init), so a store may drop it
	// then; math.MaxInt64 when it never expires by itself.
	Expiry(p *Params) int64
}

// WindowPtr constrains a type parameter to a pointer to a state type S that
// implements Window; it lets Check, Take and Report work on a []S without
// allocating.
type WindowPtr[S any] interface {
	*S
	Window
}

// ResetOf returns the Reset of window w at now in ticks: the RetryAfter of
// a request of cost Remaining+1, or 0 when Remaining equals the capacity
// (nothing to give back) — see ARCHITECTURE.md.
func ResetOf(w Window, p *Params, now int64) int64 {
	r := w.Remaining(p, now)
	if r >= p.Capacity {
		return 0
	}
	ok, ra := w.Allow(p, now, r+1)
	if ok {
		return 0
	}
	return ra
}

// Check decides a hit of cost at now against states (states[i] is window
// i of l) without changing them. It sets d.Allowed, d.Never, d.RetryAfter
// and d.Window and clears the other fields. A cost above a window's
// capacity is denied with Never set. Otherwise the hit is allowed iff every
// window allows it; RetryAfter is the longest among the denying windows and
// Window that window (the first one on ties).
func Check[S any, P WindowPtr[S]](l *Limit, states []S, now, cost int64, d *Decision) {
	*d = Decision{Allowed: true}
	var longest int64 = -1
	for i := range states {
		p := l.param(i)
		if cost > p.Capacity {
			*d = Decision{Never: true, Window: i}
			return
		}
		ok, ra := P(&states[i]).Allow(p, now, cost)
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
		d.RetryAfter = time.Duration(longest) * Tick
	}
}

// Take counts cost at now in every window of states.
func Take[S any, P WindowPtr[S]](l *Limit, states []S, now, cost int64) {
	for i := range states {
		P(&states[i]).Take(l.param(i), now, cost)
	}
}

// Report completes a Decision made by Check, after the hit was counted or
// not: it sets Limit, Remaining and Reset of the reported window, choosing
// for an allowed hit the window with the lowest Remaining/Capacity (the
// first one on ties).
func Report[S any, P WindowPtr[S]](l *Limit, states []S, now int64, d *Decision) {
	if d.Allowed {
		best := -1.0
		for i := range states {
			p := l.param(i)
			frac := float64(P(&states[i]).Remaining(p, now)) / float64(p.Capacity)
			if best < 0 || frac < best {
				best, d.Window = frac, i
			}
		}
	}
	p := l.param(d.Window)
	w := P(&states[d.Window])
	d.Limit = p.Capacity
	d.Remaining = w.Remaining(p, now)
	d.Reset = time.Duration(ResetOf(w, p, now)) * Tick
}

// Usage writes the state of every window of states at now into out
// (len(out) ≥ len(states)) without changing it. Used is Capacity −
// Remaining.
func Usage[S any, P WindowPtr[S]](l *Limit, states []S, now int64, out []WindowUsage) {
	for i := range states {
		p := l.param(i)
		w := P(&states[i])
		rem := w.Remaining(p, now)
		u := WindowUsage{Used: p.Capacity - rem, Remaining: rem,
			Reset: time.Duration(ResetOf(w, p, now)) * Tick}
		if i < len(l.Rates) {
			u.Rate = l.Rates[i]
		}
		out[i] = u
	}
}

// Expiry returns the instant from which every window of states is fresh.
func Expiry[S any, P WindowPtr[S]](l *Limit, states []S) int64 {
	exp := int64(math.MinInt64)
	for i := range states {
		exp = max(exp, P(&states[i]).Expiry(l.param(i)))
	}
	return exp
}

// Init makes every window of states fresh at now.
func Init[S any, P WindowPtr[S]](l *Limit, states []S, now int64) {
	for i := range states {
		P(&states[i]).Init(l.param(i), now)
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

// smallestFrom is smallest with no upper bound: ok must hold for some
// d ≥ lo. It gallops up from the guess (doubling the step) when ok(guess)
// fails.
func smallestFrom(lo, guess int64, ok func(int64) bool) int64 {
	guess = max(guess, lo)
	if ok(guess) {
		return smallest(lo, guess, guess, ok)
	}
	lo = guess + 1
	for step := int64(1); ; step *= 2 {
		if ok(lo + step - 1) {
			return bisect(lo, lo+step-1, ok)
		}
		lo += step
	}
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
