package window

import (
	"math"

	"github.com/tollgate/gateway/ratelimit"
)

// Giver is a state that can give back units a request counted ahead of
// use and did not use (ratelimit.Settler): a reservation settled below its
// estimate.
type Giver interface {
	// GiveBack gives back cost units counted at the instant at, as seen
	// at now (ratelimit.Settler documents each algorithm's rule).
	GiveBack(p *ratelimit.Params, now, at, cost int64)
}

var (
	_ Giver = (*FixedWindowState)(nil)
	_ Giver = (*QuotaState)(nil)
	_ Giver = (*SlidingCounterState)(nil)
	_ Giver = (*LogState)(nil)
	_ Giver = (*TokenBucketState)(nil)
	_ Giver = (*GCRAState)(nil)
)

// GiveBack gives back cost units counted at at in every window of states
// whose state type can (others are left alone).
func GiveBack[S any, P StatePtr[S]](l *ratelimit.Limit, states []S, now, at, cost int64) {
	for i := range states {
		if g, ok := any(P(&states[i])).(Giver); ok {
			g.GiveBack(l.ParamsOf(i), now, at, cost)
		}
	}
}

// GiveBack implements Giver: Return (the window of at, while current).
func (s *FixedWindowState) GiveBack(p *ratelimit.Params, _, at, cost int64) { s.Return(p, at, cost) }

// GiveBack implements Giver: Return (the bucket of at, while in the ring).
func (s *SlidingCounterState) GiveBack(p *ratelimit.Params, _, at, cost int64) {
	s.Return(p, at, cost)
}

// GiveBack implements Giver: only to the period at fell in, while it is
// the state's; never below zero.
func (s *QuotaState) GiveBack(_ *ratelimit.Params, _, at, cost int64) {
	if at < s.Start || at >= s.End {
		return
	}
	s.Count = max(0, s.Count-cost)
}

// GiveBack implements Giver: up to cost of the units logged at the tick
// at that are still logged (an expired unit counts no more).
func (s *LogState) GiveBack(_ *ratelimit.Params, _, at, cost int64) {
	left := cost
	for k := s.n - 1; k >= 0 && left > 0; k-- {
		e := s.entry(k)
		if e.ts < at {
			break
		}
		if e.ts == at {
			d := min(e.units, left)
			e.units -= d
			left -= d
			s.units -= d
		}
	}
	if left == cost {
		return
	}
	// Drop the emptied entries, keeping the order.
	w := 0
	for k := 0; k < s.n; k++ {
		if e := *s.entry(k); e.units > 0 {
			*s.entry(w) = e
			w++
		}
	}
	s.n = w
}

// GiveBack implements Giver: the tokens come back, up to the burst. (A
// bucket that refilled to its burst between the count and now had lost
// them to the cap already: see ARCHITECTURE.md "Settling a reservation"
// for that bound.)
func (s *TokenBucketState) GiveBack(p *ratelimit.Params, _, _, cost int64) {
	s.Tokens = math.Min(float64(p.Capacity), s.Tokens+float64(cost))
}

// GiveBack implements Giver: tat moves back by cost·T, not before now
// (a tat at or before now is a full bucket already).
func (s *GCRAState) GiveBack(p *ratelimit.Params, now, _, cost int64) {
	n := float64(now)
	if s.TAT <= n {
		return
	}
	t, _ := gcraParams(p)
	s.TAT = math.Max(n, s.TAT-float64(cost)*t)
}
