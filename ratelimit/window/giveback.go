package window

import "github.com/tollgate/gateway/ratelimit"

// Returner is a state that can give back units counted ahead of use (a
// hybrid store's unused lease, ratelimit.Returner).
type Returner interface {
	// Return gives back cost units counted at the instant at, only to the
	// window or bucket at fell in and only while the state still holds
	// it, never below zero.
	Return(p *ratelimit.Params, at, cost int64)
}

var (
	_ Returner = (*FixedWindowState)(nil)
	_ Returner = (*SlidingCounterState)(nil)
)

// Return implements Returner. Units counted in window w come back only
// while the state is still window w: once a later window has started
// (its first count moved Start), giving them back would admit them in a
// window that never counted them.
func (s *FixedWindowState) Return(p *ratelimit.Params, at, cost int64) {
	if s.Start != floorDiv(at, p.Window)*p.Window {
		return
	}
	s.Count = max(0, s.Count-cost)
}

// Return implements Returner. Units counted in bucket j come back to
// bucket j while it is in the ring (j within N of the newest bucket); a
// bucket that has left the ring weighs nothing any more.
func (s *SlidingCounterState) Return(p *ratelimit.Params, at, cost int64) {
	j := floorDiv(at, p.Precision)
	if j > s.Newest || j < s.Newest-p.Buckets || len(s.Counts) == 0 {
		return
	}
	k := mod(j, p.Buckets+1)
	s.Counts[k] = max(0, s.Counts[k]-cost)
}
