package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

// Batch lets a limit trade exactness for fewer store calls: a hybrid store
// (package hybrid) admits its hits from leases, slices of the budget each
// gateway takes from the shared store ahead of use. ARCHITECTURE.md
// "Hybrid counting" gives the bounds on the error.
type Batch struct {
	// Interval is the longest a gateway admits from one lease before it
	// asks the store again (a lease also ends with its window for
	// FixedWindow). It bounds how stale a gateway's view is.
	Interval time.Duration
	// Lease is the most units one lease takes (k), and never more than
	// the rate's limit (a plan's smaller rates clamp it). A fleet of N gateways
	// may strand up to N·(k−1) units, and a SlidingWindowCounter may
	// admit up to N·(k−1) units past its estimate.
	Lease int64
}

// Bounds of Batch.Interval.
const (
	MinBatchInterval = time.Millisecond
	MaxBatchInterval = time.Minute
)

// Batchable reports whether a's hits may be decided from leases: the
// counting algorithms whose state is a sum of units, so that units counted
// ahead of use are the same units (FixedWindow, SlidingWindowCounter).
func (a Algorithm) Batchable() bool { return a == FixedWindow || a == SlidingWindowCounter }

// checkBatch reports what is wrong with l.Batch, if set.
func (l *Limit) checkBatch() error {
	b := l.Batch
	if b == nil {
		return nil
	}
	switch {
	case !l.Algorithm.Batchable():
		return fmt.Errorf("sync = \"batched\" supports fixed_window and sliding_window_counter, not %s", l.Algorithm)
	case len(l.Rates) != 1:
		return errors.New("sync = \"batched\" requires exactly one rate")
	case l.Shadow:
		return errors.New("sync = \"batched\" applies to enforced limits, not shadow ones")
	case b.Interval < MinBatchInterval || b.Interval > MaxBatchInterval:
		return fmt.Errorf("sync_interval must be between %s and %s, got %s", MinBatchInterval, MaxBatchInterval, b.Interval)
	case b.Lease < 1 || b.Lease > MaxLimit:
		return fmt.Errorf("lease_size must be in 1..2^53, got %d", b.Lease)
	}
	return nil
}
