package adaptive

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// A window's latencies are kept in log-linear buckets of microseconds:
// 32 per power of two, so a bucket is at most 3.1% wide, and adding a
// sample is one atomic increment (no lock, no allocation, whatever the
// number of requests finishing at once). The median is read from the
// counts when the window closes.
const (
	subBits  = 5
	subCount = 1 << subBits
	// octaves covers 1µs to 2^40µs (about 12 days): anything longer lands
	// in the last bucket.
	octaves  = 41
	nBuckets = octaves * subCount
)

type histogram struct {
	b [nBuckets]atomic.Uint32
}

// bucketOf returns the bucket of a latency in microseconds.
func bucketOf(us uint64) int {
	if us < subCount {
		return int(us)
	}
	o := bits.Len64(us) - 1 // us in [2^o, 2^(o+1))
	sub := (us >> (o - subBits)) & (subCount - 1)
	i := (o-subBits+1)*subCount + int(sub)
	if i >= nBuckets {
		return nBuckets - 1
	}
	return i
}

// bucketMid returns the latency a bucket stands for: its middle.
func bucketMid(i int) time.Duration {
	if i < subCount {
		return time.Duration(i)*time.Microsecond + time.Microsecond/2
	}
	o := i/subCount + subBits - 1
	sub := uint64(i % subCount)
	lo := (uint64(1) << o) + sub<<(o-subBits)
	width := uint64(1) << (o - subBits)
	return time.Duration(lo+width/2) * time.Microsecond
}

func (h *histogram) add(d time.Duration) {
	us := uint64(0)
	if d > 0 {
		us = uint64(d / time.Microsecond)
	}
	h.b[bucketOf(us)].Add(1)
}

// drain empties the histogram into counts and returns their total.
// Samples added meanwhile land in this window or the next, never lost.
func (h *histogram) drain(counts *[nBuckets]uint32) uint64 {
	var n uint64
	for i := range h.b {
		c := h.b[i].Swap(0)
		counts[i] = c
		n += uint64(c)
	}
	return n
}

// median returns the latency below which half of the n samples in counts
// lie (0 for none).
func median(counts *[nBuckets]uint32, n uint64) time.Duration {
	if n == 0 {
		return 0
	}
	half := (n + 1) / 2
	var seen uint64
	for i, c := range counts {
		seen += uint64(c)
		if seen >= half {
			return bucketMid(i)
		}
	}
	return bucketMid(nBuckets - 1)
}
