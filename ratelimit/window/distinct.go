package window

import (
	"math"
	"slices"

	"github.com/tollgate/gateway/ratelimit"
)

// DistinctState is the state of a distinct window (ARCHITECTURE.md
// "distinct"): the values seen in the sub-windows (i−N, i], exactly while
// there are at most ratelimit.DistinctExact of them, as a HyperLogLog per
// sub-window after. Sub-window j covers [j·P, (j+1)·P). Unlike the other
// states its decisions depend on the hit's value, so it is not a State:
// stores call its methods directly.
type DistinctState struct {
	// Newest is the newest sub-window index counted in (or normalised to).
	Newest int64
	// Exact holds the values while the key is exact: each value's hash
	// and the newest sub-window it was seen in. Entries whose sub-window
	// left the window are dead and dropped when room is needed.
	Exact []DistinctEntry
	// HLL is set once the key is estimated; Exact is then nil.
	HLL *DistinctHLL
}

// DistinctEntry is one value of an exact DistinctState.
type DistinctEntry struct {
	V      uint64 // the value's hash
	Bucket int64  // the newest sub-window it was seen in
}

// DistinctHLL is the estimated part of a DistinctState: a register array
// per sub-window (Ring[j mod N] for sub-window j), Union their
// register-wise maximum over the window's sub-windows and Histo the
// number of Union registers holding each value.
type DistinctHLL struct {
	Ring  [][]uint8
	Union []uint8
	Histo [ratelimit.DistinctMaxRank + 1]int64
	// Filled counts the non-zero registers of each ring array, so that
	// the oldest sub-window holding a value is found without a scan.
	Filled [ratelimit.DistinctMaxBuckets]int64
	// Bits is each ring slot's membership bitmap
	// (ratelimit.DistinctBit).
	Bits [][]uint64
}

// ringOf returns the ring slot of sub-window j among n.
func ringOf(j, n int64) int64 { return (j%n + n) % n }

// Init makes the state that of a key never seen before at now.
func (s *DistinctState) Init(p *ratelimit.Params, now int64) {
	*s = DistinctState{Newest: floorDiv(now, p.Precision)}
}

// index returns the sub-window of now: the stored newest one when the
// clock stepped back.
func (s *DistinctState) index(p *ratelimit.Params, now int64) int64 {
	return max(floorDiv(now, p.Precision), s.Newest)
}

// Normalize moves an estimated state to sub-window index(now): the
// sub-windows that left the window are cleared and Union and Histo
// recomputed from the rest; an estimated state whose sub-windows have
// all left becomes an empty exact one. It changes no decision (the
// sub-windows it clears no longer count), which is why a store may write
// it back even when nothing is counted.
func (s *DistinctState) Normalize(p *ratelimit.Params, now int64) {
	i := s.index(p, now)
	if s.HLL == nil || i == s.Newest {
		return
	}
	n := p.Buckets
	if i-s.Newest >= n {
		*s = DistinctState{Newest: i}
		return
	}
	h := s.HLL
	for j := s.Newest + 1; j <= i; j++ {
		clear(h.Ring[ringOf(j, n)])
		clear(h.Bits[ringOf(j, n)])
		h.Filled[ringOf(j, n)] = 0
	}
	s.Newest = i
	h.recompute()
	if h.Histo[0] == ratelimit.DistinctRegisters {
		// Every value has left: exact again, from nothing. (A store
		// never empties a state it holds this way: every value has left
		// only once the state's expiry has passed, and a store decides
		// such a key on a fresh state, leaving the stored one alone.)
		*s = DistinctState{Newest: i}
	}
}

// recompute sets Union and Histo from the ring.
func (h *DistinctHLL) recompute() {
	clear(h.Union)
	for _, r := range h.Ring {
		for k, v := range r {
			h.Union[k] = max(h.Union[k], v)
		}
	}
	h.Histo = [ratelimit.DistinctMaxRank + 1]int64{}
	for _, v := range h.Union {
		h.Histo[v]++
	}
}

// Count returns the number of distinct values in the window at now: exact
// while the state is exact, else the estimate.
func (s *DistinctState) Count(p *ratelimit.Params, now int64) int64 {
	s.Normalize(p, now)
	if s.HLL != nil {
		return Estimate(&s.HLL.Histo)
	}
	return int64(s.live(p, s.index(p, now)))
}

// live returns the number of exact values seen in (i−N, i].
func (s *DistinctState) live(p *ratelimit.Params, i int64) int {
	n := 0
	for _, e := range s.Exact {
		if e.Bucket > i-p.Buckets {
			n++
		}
	}
	return n
}

// has reports whether value v counts in the window ending with
// sub-window i: an exact entry seen in it, or, estimated, registers that
// v would not raise and v's bit set in a sub-window of the window (a
// normalised state holds only those).
func (s *DistinctState) has(p *ratelimit.Params, i int64, v uint64) bool {
	if h := s.HLL; h != nil {
		reg, rank := ratelimit.DistinctRegister(v)
		if int(h.Union[reg]) < rank {
			return false
		}
		b := ratelimit.DistinctBit(v)
		for _, bm := range h.Bits {
			if bm[b/64]&(1<<(b%64)) != 0 {
				return true
			}
		}
		return false
	}
	for _, e := range s.Exact {
		if e.V == v {
			return e.Bucket > i-p.Buckets
		}
	}
	return false
}

// Allow reports whether value v is admitted at now: it already counts in
// the window, or one more value keeps the count within L. A denial's wait
// is RetryAfter (see there). The state is normalised, nothing else
// changes.
func (s *DistinctState) Allow(p *ratelimit.Params, now int64, v uint64) (bool, int64) {
	s.Normalize(p, now)
	i := s.index(p, now)
	if s.has(p, i, v) {
		return true, 0
	}
	c := s.Count(p, now)
	if c+1 <= p.Limit {
		return true, 0
	}
	return false, s.retryAfter(p, now, i, c)
}

// retryAfter is the wait before a new value is admitted, the count at now
// being c ≥ L. Exact: the instant the (c−L+1)-th oldest value leaves the
// window. Estimated: the instant the oldest non-empty sub-window leaves
// it, the first at which the estimate can fall (it may still be too high
// then: a lower bound, which costs no estimate per sub-window).
func (s *DistinctState) retryAfter(p *ratelimit.Params, now, i, c int64) int64 {
	if s.HLL != nil {
		return s.oldestLeaves(p, now, i)
	}
	bs := make([]int64, 0, len(s.Exact))
	for _, e := range s.Exact {
		if e.Bucket > i-p.Buckets {
			bs = append(bs, e.Bucket)
		}
	}
	slices.Sort(bs)
	k := c - p.Limit // 0-based: the (c−L+1)-th oldest
	if k < 0 || k >= int64(len(bs)) {
		return max((i+1)*p.Precision-now, 1)
	}
	return max((bs[k]+p.Buckets)*p.Precision-now, 1)
}

// oldestLeaves returns the wait until the oldest sub-window of (i−N, i]
// holding anything leaves the window, 0 when none does.
func (s *DistinctState) oldestLeaves(p *ratelimit.Params, now, i int64) int64 {
	oldest := int64(math.MaxInt64)
	if s.HLL != nil {
		for j := i - p.Buckets + 1; j <= i; j++ {
			if s.HLL.Filled[ringOf(j, p.Buckets)] > 0 {
				oldest = j
				break
			}
		}
	} else {
		for _, e := range s.Exact {
			if e.Bucket > i-p.Buckets {
				oldest = min(oldest, e.Bucket)
			}
		}
	}
	if oldest == math.MaxInt64 {
		return 0
	}
	return max((oldest+p.Buckets)*p.Precision-now, 1)
}

// Take counts value v at now: an exact value is (re)stamped with now's
// sub-window; a new one is added, the dead ones dropped first when the
// set holds DistinctExact; a new value that finds DistinctExact live ones
// turns the state into an estimate of them all.
func (s *DistinctState) Take(p *ratelimit.Params, now int64, v uint64) {
	s.Normalize(p, now)
	i := s.index(p, now)
	s.Newest = i
	if s.HLL != nil {
		s.HLL.add(p, i, v)
		return
	}
	for k := range s.Exact {
		if s.Exact[k].V == v {
			s.Exact[k].Bucket = i
			return
		}
	}
	if len(s.Exact) >= ratelimit.DistinctExact {
		s.Exact = slices.DeleteFunc(s.Exact, func(e DistinctEntry) bool { return e.Bucket <= i-p.Buckets })
	}
	if len(s.Exact) < ratelimit.DistinctExact {
		s.Exact = append(s.Exact, DistinctEntry{V: v, Bucket: i})
		return
	}
	h := &DistinctHLL{Ring: make([][]uint8, p.Buckets), Union: make([]uint8, ratelimit.DistinctRegisters),
		Bits: make([][]uint64, p.Buckets)}
	for j := range h.Ring {
		h.Ring[j] = make([]uint8, ratelimit.DistinctRegisters)
		h.Bits[j] = make([]uint64, ratelimit.DistinctBitmap/64)
	}
	h.Histo[0] = ratelimit.DistinctRegisters
	for _, e := range s.Exact {
		h.add(p, e.Bucket, e.V)
	}
	s.Exact = nil
	s.HLL = h
	h.add(p, i, v)
}

// add sets v's register in sub-window j's array and in the union.
func (h *DistinctHLL) add(p *ratelimit.Params, j int64, v uint64) {
	reg, rank := ratelimit.DistinctRegister(v)
	r := uint8(rank)
	slot := ringOf(j, p.Buckets)
	ring := h.Ring[slot]
	if ring[reg] == 0 {
		h.Filled[slot]++
	}
	ring[reg] = max(ring[reg], r)
	b := ratelimit.DistinctBit(v)
	h.Bits[slot][b/64] |= 1 << (b % 64)
	if u := h.Union[reg]; r > u {
		h.Histo[u]--
		h.Histo[r]++
		h.Union[reg] = r
	}
}

// Remaining returns L minus the count at now, clamped to 0..L.
func (s *DistinctState) Remaining(p *ratelimit.Params, now int64) int64 {
	return clamp(p.Limit-s.Count(p, now), 0, p.Capacity)
}

// Reset returns the wait until Remaining next increases: until the oldest
// sub-window holding a value leaves the window (0 when none holds one).
func (s *DistinctState) Reset(p *ratelimit.Params, now int64) int64 {
	s.Normalize(p, now)
	return s.oldestLeaves(p, now, s.index(p, now))
}

// Expiry returns the instant at which every sub-window counted in has
// left the window: (Newest + N)·P, or math.MinInt64 for a state that
// holds nothing.
func (s *DistinctState) Expiry(p *ratelimit.Params) int64 {
	if s.HLL == nil && len(s.Exact) == 0 {
		return math.MinInt64
	}
	// The last value counted was stamped with Newest.
	return (s.Newest + p.Buckets) * p.Precision
}

// Bytes returns the memory the state holds, everything it points to
// included.
func (s *DistinctState) Bytes() int64 {
	n := int64(48 + 16*cap(s.Exact))
	if h := s.HLL; h != nil {
		n += int64(8*len(h.Histo)+8*len(h.Filled)+72) + int64(len(h.Union)) +
			int64(len(h.Ring))*(48+ratelimit.DistinctRegisters+ratelimit.DistinctBitmap/8)
	}
	return n
}

// Estimate returns the HyperLogLog estimate of the cardinality behind the
// histogram h of DistinctRegisters registers (h[k] registers hold k): Ertl's
// improved raw estimator ("New cardinality estimation algorithms for
// HyperLogLog sketches", 2017), which needs no bias table and no
// switch to linear counting. It uses only IEEE-754 additions,
// multiplications, divisions and square roots, in the order written, so
// the Redis script computes the same bits.
func Estimate(h *[ratelimit.DistinctMaxRank + 1]int64) int64 {
	const q = ratelimit.DistinctMaxRank - 1
	m := float64(ratelimit.DistinctRegisters)
	z := m * hllTau((m-float64(h[q+1]))/m)
	for k := q; k >= 1; k-- {
		z += float64(h[k])
		z *= 0.5
	}
	z += m * hllSigma(float64(h[0])/m)
	const alphaInf = 0.721347520444481703680 // 1 / (2 ln 2)
	e := alphaInf * m * m / z
	f := math.Floor(e)
	if e-f >= 0.5 {
		f++
	}
	return int64(f)
}

// hllSigma is σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k−1), summed until it stops
// changing; +Inf at x = 1 (every register zero: the estimate is 0).
func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zp := z
		z += x * y
		y += y
		if zp == z {
			return z
		}
	}
}

// hllTau is τ(x) = (1 − x − Σ_{k≥1} (1 − x^(2^−k))² 2^−k) / 3, summed
// until it stops changing; 0 at x = 0 and x = 1.
func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zp := z
		y *= 0.5
		d := 1 - x
		z -= d * d * y
		if zp == z {
			return z / 3
		}
	}
}
