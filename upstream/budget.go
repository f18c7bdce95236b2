package upstream

import (
	"sync/atomic"
	"time"
)

// budgetBuckets is the number of buckets a budget's window is counted
// in: the window slides by a tenth of itself.
const budgetBuckets = 10

// Budget bounds a route's retries: in any window, at most MinRetries
// plus Percent % of the route's requests are retries. It counts in
// buckets of a tenth of the window with atomics: a request costs one
// clock read and one atomic add; only a retry sums the window.
// Concurrent retries may overrun the bound by the few that raced.
type Budget struct {
	spec   RetryBudget
	bucket int64 // nanoseconds
	now    func() time.Time
	b      [budgetBuckets]budgetBucket
}

type budgetBucket struct {
	epoch   atomic.Int64 // the bucket's index since the Unix epoch
	reqs    atomic.Int64
	retries atomic.Int64
}

// NewBudget returns the budget of spec on clock now (nil: time.Now).
func NewBudget(spec RetryBudget, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	w := spec.Window
	if w <= 0 {
		w = 10 * time.Second
	}
	return &Budget{spec: spec, bucket: max(int64(w)/budgetBuckets, 1), now: now}
}

// current returns the bucket of this instant, emptied when it last
// served an older one.
func (b *Budget) current() (*budgetBucket, int64) {
	idx := b.now().UnixNano() / b.bucket
	k := &b.b[idx%budgetBuckets]
	if e := k.epoch.Load(); e != idx && k.epoch.CompareAndSwap(e, idx) {
		k.reqs.Store(0)
		k.retries.Store(0)
	}
	return k, idx
}

// Request counts one request of the route (its first attempt).
func (b *Budget) Request() {
	k, _ := b.current()
	k.reqs.Add(1)
}

// TryRetry reports whether the route may retry once more now, and if so
// counts the retry.
func (b *Budget) TryRetry() bool {
	k, idx := b.current()
	var reqs, retries int64
	for i := range b.b {
		x := &b.b[i]
		if e := x.epoch.Load(); e > idx-budgetBuckets && e <= idx {
			reqs += x.reqs.Load()
			retries += x.retries.Load()
		}
	}
	if retries >= int64(b.spec.MinRetries)+reqs*int64(b.spec.Percent)/100 {
		return false
	}
	k.retries.Add(1)
	return true
}
