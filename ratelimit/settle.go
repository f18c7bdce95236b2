package ratelimit

import (
	"context"
	"time"
)

// Settleable reports whether a's units counted ahead of use can be given
// back (Settler): every algorithm whose state says where a count's units
// are (fixed and sliding windows, token bucket, GCRA, quota). Not
// Concurrency (its units are released, not given back) nor
// FixedWindowElastic (a count moves its window's end, which no give-back
// can move back for one request among others), nor Distinct (it counts
// values, not units).
func (a Algorithm) Settleable() bool {
	return a != Concurrency && a != FixedWindowElastic && a != Distinct && a != 0
}

// Settler is implemented by stores that can give back units a request
// reserved and did not use: a limit that reserves an estimate before the
// request is forwarded (a token budget's max_tokens) settles to the usage
// the upstream reports, giving back the difference (a usage above the
// estimate is charged with a HitTake). See ARCHITECTURE.md "Settling a
// reservation".
type Settler interface {
	// GiveBack gives back hits[i].Cost units that hits[i] counted at the
	// instant at[i] (the Decision.At of the count when the store reported
	// one, else the instant passed to the Decide call that counted them),
	// as far as the state still holds them at now: fixed_window and quota
	// only to the window or period at fell in while it is the state's;
	// sliding_window_counter to at's bucket while it is in the ring;
	// sliding_window_log the units logged at at that are still logged;
	// token_bucket adds them back up to the burst, gcra moves its
	// theoretical arrival time back by their emission time but not
	// before now. Never below zero. Hits of other algorithms are
	// ignored. It is not idempotent: a call whose outcome is unknown must
	// not be retried.
	GiveBack(ctx context.Context, now time.Time, hits []Hit, at []time.Time) error
}
