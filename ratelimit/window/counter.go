package window

import "github.com/tollgate/gateway/ratelimit"

// SlidingCounterState is the state of a sliding_window_counter window: the
// counts of the N+1 sub-buckets Newest−N … Newest, in a ring indexed by
// bucket index mod (N+1).
type SlidingCounterState struct {
	// Newest is the index floor(t / P) of the newest bucket counted in.
	Newest int64
	// Counts holds N+1 counters; bucket j lives at Counts[j mod (N+1)].
	Counts []int64
}

var _ State = (*SlidingCounterState)(nil)

// Init implements State. It allocates the N+1 counters when needed.
func (s *SlidingCounterState) Init(p *ratelimit.Params, now int64) {
	n := int(p.Buckets) + 1
	if cap(s.Counts) >= n {
		s.Counts = s.Counts[:n]
		clear(s.Counts)
	} else {
		s.Counts = make([]int64, n)
	}
	s.Newest = floorDiv(now, p.Precision)
}

// bucket returns the count of bucket j (0 outside the ring, including
// future buckets).
func (s *SlidingCounterState) bucket(p *ratelimit.Params, j int64) int64 {
	if j > s.Newest || j < s.Newest-p.Buckets {
		return 0
	}
	return s.Counts[mod(j, p.Buckets+1)]
}

// index returns the bucket index and offset used at now: floor(now / P) and
// now − i·P, or the stored newest index with offset 0 when the clock
// stepped back.
func (s *SlidingCounterState) index(p *ratelimit.Params, now int64) (i, e int64) {
	i = floorDiv(now, p.Precision)
	if i < s.Newest {
		return s.Newest, 0
	}
	return i, now - i*p.Precision
}

// sums returns full = Σ count[j] for j = i−N+1 … i and partial = count[i−N].
func (s *SlidingCounterState) sums(p *ratelimit.Params, i int64) (full, partial int64) {
	for j := i - p.Buckets + 1; j <= i; j++ {
		full += s.bucket(p, j)
	}
	return full, s.bucket(p, i-p.Buckets)
}

// estimate is full + partial * (P − e) / P in doubles, in this order.
func estimate(p *ratelimit.Params, full, partial, e int64) float64 {
	return float64(full) + float64(partial)*float64(p.Precision-e)/float64(p.Precision)
}

// fits reports est + c ≤ L in doubles.
func fits(p *ratelimit.Params, est float64, cost int64) bool {
	return est+float64(cost) <= float64(p.Limit)
}

// allow implements State. When denied, RetryAfter walks buckets j = i …
// i+N+1 (future counts zero) and returns the first instant j·P + e' − now
// whose estimate admits cost: e' is the smallest offset in [start, P−1]
// that fits (the estimate is monotone in e'), searched from the closed form
// ceil(P − (L − c − full_j)·P / partial_j).
func (s *SlidingCounterState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	i, e := s.index(p, now)
	full, partial := s.sums(p, i)
	if fits(p, estimate(p, full, partial, e), cost) {
		return true, 0
	}
	P := p.Precision
	for j := i; j <= i+p.Buckets+1; j++ {
		start := int64(0)
		if j == i {
			start = e
		} else {
			// Slide one bucket: j enters full, j−N leaves it and becomes partial.
			full += s.bucket(p, j) - s.bucket(p, j-p.Buckets)
			partial = s.bucket(p, j-p.Buckets)
		}
		if full+cost > p.Limit {
			continue // even a zero-weight partial does not fit
		}
		ok := func(g int64) bool { return fits(p, estimate(p, full, partial, g), cost) }
		if !ok(P - 1) {
			continue // the estimate only falls within a bucket
		}
		g := start
		if partial > 0 {
			x := float64(p.Limit - cost - full)
			g = ceilTicks(float64(P) - x*float64(P)/float64(partial))
		}
		return false, j*P + smallest(start, P-1, g, ok) - now
	}
	// Unreachable for cost ≤ L: bucket i+N+1 has an estimate of 0.
	return false, (i+p.Buckets+1)*P - now
}

// take implements State: advance to bucket i (zeroing skipped buckets),
// then count[i] += c.
func (s *SlidingCounterState) take(p *ratelimit.Params, now, cost int64) {
	i, _ := s.index(p, now)
	if i > s.Newest {
		if i-s.Newest > p.Buckets {
			clear(s.Counts)
		} else {
			for j := s.Newest + 1; j <= i; j++ {
				s.Counts[mod(j, p.Buckets+1)] = 0
			}
		}
		s.Newest = i
	}
	s.Counts[mod(i, p.Buckets+1)] += cost
}

// remaining implements State: max(0, L − ceil(est)).
func (s *SlidingCounterState) remaining(p *ratelimit.Params, now int64) int64 {
	i, e := s.index(p, now)
	full, partial := s.sums(p, i)
	est := estimate(p, full, partial, e)
	return clamp(p.Limit-ceilTicks(est), 0, p.Capacity)
}

// Expiry implements State: (Newest + N + 1)·P, when every counted bucket
// has left the window.
func (s *SlidingCounterState) Expiry(p *ratelimit.Params) int64 {
	return (s.Newest + p.Buckets + 1) * p.Precision
}

// mod returns a mod m in 0..m−1 for m > 0.
func mod(a, m int64) int64 { return a - floorDiv(a, m)*m }
