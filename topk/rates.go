package topk

import (
	"sync/atomic"
	"time"
)

// RateBucket is how long one bucket of a limit's decision history lasts.
const RateBucket = 10 * time.Second

// rateBuckets is the history kept: 10 minutes.
const rateBuckets = 60

// rateRing counts a limit's allowed, denied and shadow-denied decisions
// per RateBucket. A bucket is reset by the first decision of its new
// period; a decision racing that reset may be lost (the totals in Limit
// are exact, the history approximate at bucket edges).
type rateRing struct {
	b [rateBuckets]struct {
		epoch atomic.Int64
		n     [3]atomic.Uint64
	}
}

func (r *rateRing) add(ns int64, which int) {
	e := ns / int64(RateBucket)
	b := &r.b[e%rateBuckets]
	if old := b.epoch.Load(); old != e {
		if b.epoch.CompareAndSwap(old, e) {
			for i := range b.n {
				b.n[i].Store(0)
			}
		}
	}
	b.n[which].Add(1)
}

// Rates returns, oldest first, the allowed, denied and shadow-denied
// counts of the last n buckets ending with the one holding now.
func (l *Limit) Rates(now time.Time, n int) [][3]uint64 {
	n = min(max(n, 1), rateBuckets)
	e := now.UnixNano() / int64(RateBucket)
	out := make([][3]uint64, n)
	for i := range n {
		ep := e - int64(n-1-i)
		b := &l.rates.b[ep%rateBuckets]
		if b.epoch.Load() == ep {
			for j := range b.n {
				out[i][j] = b.n[j].Load()
			}
		}
	}
	return out
}
