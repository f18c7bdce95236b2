package window

import (
	"math"

	"github.com/tollgate/gateway/ratelimit"
)

// Reserve turns a denial that Check wrote into d into a reservation when
// l delays instead of denying (Limit.MaxDelay) and the wait fits: d is
// then allowed with Delay set to the wait, and the hit must be counted at
// now + the returned ticks (Take at that instant), which is exactly the
// state a count at the slot would leave. It returns 0 and leaves d alone
// otherwise, and for a hit whose mode is not HitCount. See
// ARCHITECTURE.md "Delay".
func Reserve(l *ratelimit.Limit, mode ratelimit.HitMode, d *ratelimit.Decision) int64 {
	if mode != ratelimit.HitCount || d.Allowed || d.Never || l.MaxDelay <= 0 || l.Shadow || d.RetryAfter <= 0 || d.RetryAfter > l.MaxDelay {
		return 0
	}
	d.Allowed, d.Delay, d.RetryAfter = true, d.RetryAfter, 0
	return int64(d.Delay / ratelimit.Tick)
}

// Reserver is a state that can give a reservation back: the delayable
// algorithms' states.
type Reserver interface {
	// Mark returns the state's time mark after a count (Decision.Mark).
	Mark() float64
	// Cancel gives back a reservation of cost units that left mark,
	// at now, as far as it is still ahead (see ARCHITECTURE.md "Delay").
	Cancel(p *ratelimit.Params, now, cost int64, mark float64)
}

var (
	_ Reserver = (*TokenBucketState)(nil)
	_ Reserver = (*GCRAState)(nil)
)

// Mark implements Reserver: the bucket's instant, which a reservation
// sets to its slot.
func (s *TokenBucketState) Mark() float64 { return float64(s.TS) }

// Cancel implements Reserver. Nothing comes back once the slot (mark) has
// come, nor when a later reservation moved the bucket's instant past it
// (its slot was computed with these tokens gone). Otherwise the bucket's
// instant moves back by the refill time of the cost, rounded down to a
// tick:
//
//	ts = ts − floor(c * W / L)          (double, this order)
//
// Adding the tokens back at the instant instead would be wrong: tokens
// held at an instant still ahead are handed out at once, before the slot,
// while moving the instant back makes them come at the rate again, as
// they would have without the reservation.
func (s *TokenBucketState) Cancel(p *ratelimit.Params, now, cost int64, mark float64) {
	if float64(now) >= mark || float64(s.TS) != mark {
		return
	}
	s.TS -= int64(math.Floor(float64(cost) * float64(p.Window) / float64(p.Limit)))
}

// Mark implements Reserver: the theoretical arrival time.
func (s *GCRAState) Mark() float64 { return s.TAT }

// Cancel implements Reserver. Nothing comes back once the slot has come
// (now ≥ mark − τ, the earliest instant the slot can be). Otherwise the
// emission time given back is the reservation's c·T less the time later
// reservations added after it:
//
//	give = c * T − (tat − mark)          (double, this order)
//	tat  = tat − give                    if give > 0
func (s *GCRAState) Cancel(p *ratelimit.Params, now, cost int64, mark float64) {
	t, tau := gcraParams(p)
	if float64(now) >= mark-tau {
		return
	}
	give := float64(cost)*t - (s.TAT - mark)
	if !(give > 0) {
		return
	}
	s.TAT -= give
}
