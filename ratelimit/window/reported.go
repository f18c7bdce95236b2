package window

import "github.com/tollgate/gateway/ratelimit"

// The Reported methods give a window's Remaining and Reset at now as
// Report does for a limit of that one window, on a state the caller holds
// by value: the Redis store builds one from a reply on every decision,
// and through Report's type parameter or the State interface it would
// move to the heap each time (see resetAfter). They exist for the
// states a one-hit reply carries.

// Reported returns the window's Remaining and Reset (ticks) at now, as
// Report reports them.
func (s *FixedWindowState) Reported(p *ratelimit.Params, now int64) (remaining, reset int64) {
	remaining = s.remaining(p, now)
	return remaining, resetAfter(p, remaining, func(c int64) (bool, int64) { return s.allow(p, now, c) })
}

// Reported returns the window's Remaining and Reset (ticks) at now, as
// Report reports them.
func (s *GCRAState) Reported(p *ratelimit.Params, now int64) (remaining, reset int64) {
	remaining = s.remaining(p, now)
	return remaining, resetAfter(p, remaining, func(c int64) (bool, int64) { return s.allow(p, now, c) })
}

// Reported returns the window's Remaining and Reset (ticks) at now, as
// Report reports them.
func (s *TokenBucketState) Reported(p *ratelimit.Params, now int64) (remaining, reset int64) {
	remaining = s.remaining(p, now)
	return remaining, resetAfter(p, remaining, func(c int64) (bool, int64) { return s.allow(p, now, c) })
}

// Reported returns the window's Remaining and Reset (ticks) at now, as
// Report reports them. Counts may be a slice of the caller's array.
func (s *SlidingCounterState) Reported(p *ratelimit.Params, now int64) (remaining, reset int64) {
	remaining = s.remaining(p, now)
	return remaining, resetAfter(p, remaining, func(c int64) (bool, int64) { return s.allow(p, now, c) })
}
