package memstore

import (
	"unsafe"

	"github.com/tollgate/gateway/ratelimit"
)

// cell is the counter state of one limit for one key: one window state per
// rate, plus the instant from which the whole state is fresh again.
type cell interface {
	check(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision)
	take(l *ratelimit.Limit, now, cost int64)
	report(l *ratelimit.Limit, now int64, d *ratelimit.Decision)
	usage(l *ratelimit.Limit, now int64, out []ratelimit.WindowUsage)
	// release gives back concurrency units and reports whether the state
	// is now empty.
	release(cost int64) (empty bool)
	// expiry is the first instant at which the state equals a fresh one.
	expiry() int64
	// bytes is the memory the cell holds, everything it points to
	// included.
	bytes() int64
}

// one is the cell of a single-window limit: the state is stored inline, so
// a key costs one allocation.
type one[S any, P ratelimit.WindowPtr[S]] struct {
	exp int64
	w   [1]S
}

func (c *one[S, P]) check(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision) {
	ratelimit.Check[S, P](l, c.w[:], now, cost, d)
}

func (c *one[S, P]) take(l *ratelimit.Limit, now, cost int64) {
	ratelimit.Take[S, P](l, c.w[:], now, cost)
	c.exp = ratelimit.Expiry[S, P](l, c.w[:])
}

func (c *one[S, P]) report(l *ratelimit.Limit, now int64, d *ratelimit.Decision) {
	ratelimit.Report[S, P](l, c.w[:], now, d)
}

func (c *one[S, P]) usage(l *ratelimit.Limit, now int64, out []ratelimit.WindowUsage) {
	ratelimit.Usage[S, P](l, c.w[:], now, out)
}

func (c *one[S, P]) release(cost int64) bool { return release(c.w[:], cost) }

func (c *one[S, P]) expiry() int64 { return c.exp }

func (c *one[S, P]) bytes() int64 { return int64(unsafe.Sizeof(*c)) + stateBytes(c.w[:]) }

// many is the cell of a limit with several rates.
type many[S any, P ratelimit.WindowPtr[S]] struct {
	exp int64
	w   []S
}

func (c *many[S, P]) check(l *ratelimit.Limit, now, cost int64, d *ratelimit.Decision) {
	ratelimit.Check[S, P](l, c.w, now, cost, d)
}

func (c *many[S, P]) take(l *ratelimit.Limit, now, cost int64) {
	ratelimit.Take[S, P](l, c.w, now, cost)
	c.exp = ratelimit.Expiry[S, P](l, c.w)
}

func (c *many[S, P]) report(l *ratelimit.Limit, now int64, d *ratelimit.Decision) {
	ratelimit.Report[S, P](l, c.w, now, d)
}

func (c *many[S, P]) usage(l *ratelimit.Limit, now int64, out []ratelimit.WindowUsage) {
	ratelimit.Usage[S, P](l, c.w, now, out)
}

func (c *many[S, P]) release(cost int64) bool { return release(c.w, cost) }

func (c *many[S, P]) expiry() int64 { return c.exp }

func (c *many[S, P]) bytes() int64 {
	var s S
	return int64(unsafe.Sizeof(*c)) + int64(len(c.w))*int64(unsafe.Sizeof(s)) + stateBytes(c.w)
}

// release gives back cost units of a concurrency state; other states are
// left alone. It reports whether the state holds nothing any more.
func release[S any](w []S, cost int64) bool {
	if len(w) != 1 {
		return false
	}
	cs, ok := any(&w[0]).(*ratelimit.ConcurrencyState)
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
		return build[ratelimit.FixedWindowState](l, now)
	case ratelimit.FixedWindowElastic:
		return build[ratelimit.ElasticState](l, now)
	case ratelimit.SlidingWindowLog:
		return build[ratelimit.LogState](l, now)
	case ratelimit.SlidingWindowCounter:
		return build[ratelimit.SlidingCounterState](l, now)
	case ratelimit.TokenBucket:
		return build[ratelimit.TokenBucketState](l, now)
	case ratelimit.GCRA:
		return build[ratelimit.GCRAState](l, now)
	default:
		return build[ratelimit.ConcurrencyState](l, now)
	}
}

func build[S any, P ratelimit.WindowPtr[S]](l *ratelimit.Limit, now int64) cell {
	if n := l.Windows(); n != 1 {
		c := &many[S, P]{w: make([]S, n)}
		ratelimit.Init[S, P](l, c.w, now)
		c.exp = ratelimit.Expiry[S, P](l, c.w)
		return c
	}
	c := &one[S, P]{}
	ratelimit.Init[S, P](l, c.w[:], now)
	c.exp = ratelimit.Expiry[S, P](l, c.w[:])
	return c
}
