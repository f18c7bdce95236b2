package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HitMode says how a store treats one hit of a Decide call. Counting by
// response splits a hit in two calls: a Peek before the request is
// forwarded and a Take once the upstream has answered.
type HitMode uint8

const (
	// HitCount (the zero value) checks the hit and counts it when the
	// request is allowed.
	HitCount HitMode = iota
	// HitPeek checks the hit like HitCount (its denial denies the
	// request) but never counts it.
	HitPeek
	// HitTake counts the hit without checking it: it is always allowed
	// and is counted when the request is (so, with only HitTake hits,
	// always), even past the limit. A window may then hold more than its
	// limit; it admits nothing more until it has drained below.
	HitTake
	// HitNoWait is HitCount for a limit with MaxDelay that must not
	// reserve a slot now (the gateway's waiting room for it is full): a
	// hit that would have to wait is denied, as without MaxDelay.
	HitNoWait
)

var hitModeNames = [...]string{HitCount: "count", HitPeek: "peek", HitTake: "take", HitNoWait: "no-wait"}

// String returns "count", "peek" or "take".
func (m HitMode) String() string {
	if int(m) < len(hitModeNames) {
		return hitModeNames[m]
	}
	return fmt.Sprintf("HitMode(%d)", m)
}

// Delayable reports whether the algorithm can reserve a slot in the
// future (TokenBucket and GCRA: their state is a point in time that a
// reservation moves forward).
func (a Algorithm) Delayable() bool { return a == TokenBucket || a == GCRA }

// Takeable reports whether "take c units now" is defined for a, so that a
// limit may count by response: every algorithm but Concurrency, whose
// units are held by a request in flight and given back when it ends.
func (a Algorithm) Takeable() bool { return a != Concurrency }

// validateDelay checks MaxDelay: only on a delayable algorithm with one
// rate, not in shadow mode (a shadow limit never changes a request, so it
// would never delay one), at most MaxWindow.
func (l *Limit) validateDelay() error {
	switch {
	case l.MaxDelay == 0:
		return nil
	case l.MaxDelay < 0 || l.MaxDelay%Tick != 0 || l.MaxDelay > MaxWindow:
		return fmt.Errorf("max_delay must be a whole number of microseconds in 1µs..366 days, got %s", l.MaxDelay)
	case !l.Algorithm.Delayable():
		return fmt.Errorf("delay applies only to token_bucket and gcra, not %s", l.Algorithm)
	case len(l.Rates) != 1:
		return errors.New("delay requires exactly one rate")
	case l.Shadow:
		return errors.New("delay cannot be used in shadow mode: a shadow limit never delays a request")
	}
	return nil
}

// Canceler is implemented by stores that can give back a reservation: a
// hit of a limit with MaxDelay whose Decision has Delay > 0 holds its
// slot from the decision on, and a request that will not be forwarded
// after all (its client went away while it waited) gives the slot back.
type Canceler interface {
	// Cancel gives back the reservations of the hits whose decision ds[i]
	// was counted with Delay > 0, as far as they are still ahead at now:
	// never the units other requests reserved since, never a slot whose
	// instant has come (see ARCHITECTURE.md "Delay"). Other hits are
	// ignored. Call it at most once per decision; it is not idempotent
	// and must not be retried blindly.
	Cancel(ctx context.Context, now time.Time, hits []Hit, ds []Decision) error
}

// Returner is implemented by stores that can give back units counted
// ahead of use: a hybrid store's lease of a batched limit (Limit.Batch)
// that ends with units it did not admit gives them back so that other
// gateways may admit them.
type Returner interface {
	// Return gives back hits[i].Cost units of hits[i] counted at the
	// instant at[i] (the Decision.At of the count when the store reported
	// one, else the instant passed to the Decide call that counted them),
	// only to the window (fixed_window) or bucket
	// (sliding_window_counter) that instant fell in, and only while the
	// store still holds it; never below zero. Other algorithms and hits
	// are ignored. It is not idempotent: a call whose outcome is unknown
	// must not be retried (under-admission is safe, a double return is
	// not).
	Return(ctx context.Context, now time.Time, hits []Hit, at []time.Time) error
}
