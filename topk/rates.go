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
		// allowed, denied, shadow-denied; the sum of the used share
		// (permille) of decisions that report one, and their number.
		n [5]atomic.Uint64
	}
}

func (r *rateRing) add(ns int64, which int, usedPermille int64) {
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
	if usedPermille >= 0 {
		b.n[3].Add(uint64(usedPermille))
		b.n[4].Add(1)
	}
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
			for j := range out[i] {
				out[i][j] = b.n[j].Load()
			}
		}
	}
	return out
}

// Utilisation is the mean share of its window (0..1) that decisions of
// the last n buckets found used, -1 when none reported one.
func (l *Limit) Utilisation(now time.Time, n int) float64 {
	n = min(max(n, 1), rateBuckets)
	e := now.UnixNano() / int64(RateBucket)
	var sum, cnt uint64
	for i := range n {
		ep := e - int64(i)
		b := &l.rates.b[ep%rateBuckets]
		if b.epoch.Load() == ep {
			sum += b.n[3].Load()
			cnt += b.n[4].Load()
		}
	}
	if cnt == 0 {
		return -1
	}
	return float64(sum) / float64(cnt) / 1000
}

// Latency keeps the store's call latency per RateBucket: total and count
// of timed calls, and errors.
type Latency struct {
	b [rateBuckets]struct {
		epoch atomic.Int64
		n     [3]atomic.Uint64 // sum ns, calls, errors
	}
}

// Add records one store call of duration d (failed when err).
func (l *Latency) Add(now time.Time, d time.Duration, failed bool) {
	e := now.UnixNano() / int64(RateBucket)
	b := &l.b[e%rateBuckets]
	if old := b.epoch.Load(); old != e {
		if b.epoch.CompareAndSwap(old, e) {
			for i := range b.n {
				b.n[i].Store(0)
			}
		}
	}
	b.n[0].Add(uint64(max(d, 0)))
	b.n[1].Add(1)
	if failed {
		b.n[2].Add(1)
	}
}

// Recent returns the mean latency, the timed calls and the errors of the
// last n buckets.
func (l *Latency) Recent(now time.Time, n int) (mean time.Duration, calls, errs uint64) {
	n = min(max(n, 1), rateBuckets)
	e := now.UnixNano() / int64(RateBucket)
	var sum uint64
	for i := range n {
		ep := e - int64(i)
		b := &l.b[ep%rateBuckets]
		if b.epoch.Load() == ep {
			sum += b.n[0].Load()
			calls += b.n[1].Load()
			errs += b.n[2].Load()
		}
	}
	if calls > 0 {
		mean = time.Duration(sum / calls)
	}
	return mean, calls, errs
}
