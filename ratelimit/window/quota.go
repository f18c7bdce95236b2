package window

import "github.com/tollgate/gateway/ratelimit"

// QuotaState is the state of a quota window: the calendar period counted
// in, [Start, End) in ticks, and the units counted there. It is a fixed
// window whose boundaries come from the calendar (Params.Calendar) rather
// than from floor(now/W): local midnights of the limit's zone.
type QuotaState struct {
	Start, End, Count int64
}

var _ State = (*QuotaState)(nil)

// Init implements State: the period containing now, nothing counted.
func (s *QuotaState) Init(p *ratelimit.Params, now int64) {
	start, end := p.Calendar.Bounds(now)
	*s = QuotaState{Start: start, End: end}
}

// at returns the state as seen at now: from End on, the period containing
// now, counted from 0; before End (including before Start, when the clock
// stepped back) the state itself.
func (s *QuotaState) at(p *ratelimit.Params, now int64) QuotaState {
	if now >= s.End {
		start, end := p.Calendar.Bounds(now)
		return QuotaState{Start: start, End: end}
	}
	return *s
}

// allow implements State. A denied request waits for the period's end.
func (s *QuotaState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	st := s.at(p, now)
	if st.Count+cost <= p.Limit {
		return true, 0
	}
	return false, st.End - now
}

// take implements State.
func (s *QuotaState) take(p *ratelimit.Params, now, cost int64) {
	*s = s.at(p, now)
	s.Count += cost
}

// remaining implements State.
func (s *QuotaState) remaining(p *ratelimit.Params, now int64) int64 {
	return clamp(p.Limit-s.at(p, now).Count, 0, p.Capacity)
}

// Expiry implements State: the period's end.
func (s *QuotaState) Expiry(*ratelimit.Params) int64 { return s.End }
