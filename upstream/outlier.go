package upstream

import (
	"sync/atomic"
	"time"
)

// outlierState is one target's passive health: its failures in a row and
// its ejection. Every field is an atomic: a request's End writes it and
// every Pick reads it, with no lock; only the decision to eject takes
// the Pool's lock.
type outlierState struct {
	// now is the Pool's clock (nil: time.Now).
	now func() time.Time
	// fails counts the failures since the last success.
	fails atomic.Int64
	// until is the end of the current ejection in Unix nanoseconds, 0
	// when the target is not ejected.
	until atomic.Int64
	// streak is the number of ejections in a row: the next lasts
	// base_ejection × 2^streak, up to max_ejection.
	streak atomic.Int32
	// back is when the last ejection ended (Unix nanoseconds), 0 when
	// none has since the streak was last reset.
	back atomic.Int64
}

func (o *outlierState) clock() int64 {
	if o.now == nil {
		return time.Now().UnixNano()
	}
	return o.now().UnixNano()
}

// ejected reports whether the target is ejected; an ejection whose time
// is up ends here (the clock is read only while one runs).
func (o *outlierState) ejected() bool {
	u := o.until.Load()
	if u == 0 {
		return false
	}
	if o.clock() < u {
		return true
	}
	if o.until.CompareAndSwap(u, 0) {
		o.back.Store(u)
	}
	return false
}

// failure counts a failure and returns the failures in a row.
func (o *outlierState) failure() int64 { return o.fails.Add(1) }

// success ends a run of failures. The streak of ejections starts again
// once the target has been back for base (an ejection's shortest
// length) and serves: one that fails again straight after returning is
// ejected for twice as long.
func (o *outlierState) success(base time.Duration) {
	if o.fails.Load() != 0 {
		o.fails.Store(0)
	}
	if o.streak.Load() == 0 {
		return
	}
	if b := o.back.Load(); b != 0 && o.clock()-b >= int64(base) {
		o.streak.Store(0)
		o.back.Store(0)
	}
}

// ejection returns the length of the k-th ejection in a row (k ≥ 1):
// base × 2^(k-1), at most max.
func ejection(base, max time.Duration, k int32) time.Duration {
	d := base
	for i := int32(1); i < k; i++ {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	return min(d, max)
}

// eject takes t out of the rotation for its next ejection's length,
// unless it already is or half of the route's targets (rounded down: 1
// of 2 or 3, none of 1) are already ejected, so that passive health
// alone never leaves a route without targets. Either way its count of
// failures starts again.
func (p *Pool) eject(t *Target) {
	p.ejectMu.Lock()
	defer p.ejectMu.Unlock()
	o := &t.out
	o.fails.Store(0)
	if o.ejected() {
		return
	}
	ts := p.Targets()
	n := 0
	for _, x := range ts {
		if x.out.ejected() {
			n++
		}
	}
	if n >= len(ts)/2 || !contains(ts, t) {
		// At the cap, or t left the list (DNS) while its request ran.
		return
	}
	k := o.streak.Add(1)
	spec := &p.spec.Outlier
	o.back.Store(0)
	o.until.Store(o.clock() + int64(ejection(spec.BaseEjection, spec.MaxEjection, k)))
}
