package memstore

import (
	"unsafe"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// cell is the counter state of one limit for one key: one window state per
// rate, plus the instant from which the whole state is fresh again.
type cell interface {
	check(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision)
	take(l *ratelimit.Limit, now, cost int64)
	report(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision)
	usage(l *ratelimit.Limit, now int64, out []ratelimit.WindowUsage)
	// release gives back concurrency units and reports whether the state
	// is now empty.
	release(cost int64) (empty bool)
	// giveBack gives back cost units counted at at (window.Returner;
	// other states are left alone).
	giveBack(l *ratelimit.Limit, at, cost int64)
	// settle gives back cost units a reservation counted at at, as seen
	// at now (window.Giver, every window; other states are left alone).
	settle(l *ratelimit.Limit, now, at, cost int64)
	// expiry is the first instant at which the state equals a fresh one.
	expiry() int64
	// bytes is the memory the cell holds, everything it points to
	// included.
	bytes() int64
}

// cellOf is the cell of a limit whose windows have state type S: one
// state per window, and the expiry of them all.
type cellOf[S any, P window.StatePtr[S]] struct {
	exp int64
	w   []S
}

// oneCell is the allocation of a single-window cell: the cell and its one
// state together, so such a key costs one allocation (w points into it).
type oneCell[S any, P window.StatePtr[S]] struct {
	c  cellOf[S, P]
	w1 [1]S
}

func (c *cellOf[S, P]) check(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision) {
	window.Check[S, P](l, c.w, now, cost, d)
}

func (c *cellOf[S, P]) take(l *ratelimit.Limit, now, cost int64) {
	window.Take[S, P](l, c.w, now, cost)
	c.exp = window.Expiry[S, P](l, c.w)
}

func (c *cellOf[S, P]) report(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision) {
	window.ReportChecked[S, P](l, c.w, now, cost, d)
}

func (c *cellOf[S, P]) usage(l *ratelimit.Limit, now int64, out []ratelimit.WindowUsage) {
	window.Usage[S, P](l, c.w, now, out)
}

func (c *cellOf[S, P]) release(cost int64) bool { return release(c.w, cost) }

func (c *cellOf[S, P]) giveBack(l *ratelimit.Limit, at, cost int64) {
	// Batchable limits have one rate; the expiry stays (fewer units end
	// no sooner).
	if r, ok := any(P(&c.w[0])).(window.Returner); ok && len(c.w) == 1 {
		r.Return(l.ParamsOf(0), at, cost)
	}
}

func (c *cellOf[S, P]) settle(l *ratelimit.Limit, now, at, cost int64) {
	// The expiry stays: fewer units end no sooner.
	window.GiveBack[S, P](l, c.w, now, at, cost)
}

func (c *cellOf[S, P]) expiry() int64 { return c.exp }

func (c *cellOf[S, P]) bytes() int64 {
	var s S
	return int64(unsafe.Sizeof(*c)) + int64(len(c.w))*int64(unsafe.Sizeof(s)) + stateBytes(c.w)
}

// release gives back cost units of a concurrency state; other states are
// left alone. It reports whether the state holds nothing any more.
func release[S any](w []S, cost int64) bool {
	if len(w) != 1 {
		return false
	}
	cs, ok := any(&w[0]).(*window.ConcurrencyState)
	if !ok {
		return false
	}
	cs.Release(cost)
	return cs.InFlight == 0
}

// newCell returns the fresh state of l at now.
func newCell(l *ratelimit.Limit, now int64) cell {
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		return build[window.FixedWindowState](l, now)
	case ratelimit.FixedWindowElastic:
		return build[window.ElasticState](l, now)
	case ratelimit.SlidingWindowLog:
		return build[window.LogState](l, now)
	case ratelimit.SlidingWindowCounter:
		return build[window.SlidingCounterState](l, now)
	case ratelimit.TokenBucket:
		return build[window.TokenBucketState](l, now)
	case ratelimit.GCRA:
		return build[window.GCRAState](l, now)
	case ratelimit.Quota:
		return build[window.QuotaState](l, now)
	case ratelimit.Distinct:
		return newDistinctCell(l, now)
	default:
		return build[window.ConcurrencyState](l, now)
	}
}

func build[S any, P window.StatePtr[S]](l *ratelimit.Limit, now int64) cell {
	var c *cellOf[S, P]
	if n := l.Windows(); n != 1 {
		c = &cellOf[S, P]{w: make([]S, n)}
	} else {
		o := &oneCell[S, P]{}
		o.c.w = o.w1[:]
		c = &o.c
	}
	window.Init[S, P](l, c.w, now)
	c.exp = window.Expiry[S, P](l, c.w)
	return c
}
