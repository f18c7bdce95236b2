package upstream

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// maxCycle is the longest round-robin cycle (the sum of the weights
// divided by their greatest common divisor) precomputed as a sequence:
// a longer one is walked under a lock instead. Building a sequence
// costs cycle × targets steps, once per target list.
const maxCycle = 8192

// balancer is the balancing state of one target list. A Pool builds it
// on the first Pick after the list changes (DNS replaces the list
// whole), so the state of an old list is never applied to a new one:
// the round robin starts a new cycle, and hashing, keyed by each
// target's address, moves only the keys of the addresses that came or
// went.
type balancer struct {
	list *[]*Target
	ts   []*Target
	rnd  func() uint64

	// Round robin: seq is one cycle of smooth weighted round robin
	// (indexes into ts), walked by the atomic counter rr; nil when the
	// cycle is longer than maxCycle, and then cur (nginx's current
	// weights) under mu makes each choice.
	seq []int32
	rr  atomic.Uint64
	mu  sync.Mutex
	cur []int64
	// w are the weights divided by their greatest common divisor, and
	// total their sum (the cycle's length).
	w     []int64
	total int64

	// Least request draws by weight: cum are the running sums of w, nil
	// when every weight is the same (a draw is then an index).
	cum []int64

	// Hash (weighted rendezvous): seeds are the targets' address hashes,
	// fw their weights as floats; equal says every weight is the same.
	seeds []uint64
	fw    []float64
	equal bool
}

// newBalancer precomputes the balancing state of the list at lp.
func newBalancer(lp *[]*Target, rnd func() uint64) *balancer {
	ts := *lp
	b := &balancer{list: lp, ts: ts, rnd: rnd, equal: true}
	if b.rnd == nil {
		b.rnd = rand.Uint64
	}
	g := int64(0)
	for _, t := range ts {
		g = gcd(g, int64(max(t.Weight, 1)))
	}
	b.w = make([]int64, len(ts))
	b.seeds = make([]uint64, len(ts))
	b.fw = make([]float64, len(ts))
	for i, t := range ts {
		b.w[i] = int64(max(t.Weight, 1)) / g
		b.total += b.w[i]
		b.fw[i] = float64(b.w[i])
		b.seeds[i] = HashKey(t.URL.String())
		if b.w[i] != b.w[0] {
			b.equal = false
		}
	}
	if !b.equal {
		b.cum = make([]int64, len(ts))
		s := int64(0)
		for i, w := range b.w {
			s += w
			b.cum[i] = s
		}
	}
	if b.total <= maxCycle {
		b.seq = make([]int32, b.total)
		cur := make([]int64, len(ts))
		for k := range b.seq {
			b.seq[k] = int32(b.smooth(cur))
		}
	} else {
		b.cur = make([]int64, len(ts))
	}
	return b
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// smooth is one step of nginx's smooth weighted round robin on the
// current weights cur: every target gains its weight, the largest is
// chosen and loses the total. Over a cycle each target is chosen as
// often as its weight, its turns spread out.
func (b *balancer) smooth(cur []int64) int {
	best := 0
	for i, w := range b.w {
		cur[i] += w
		if cur[i] > cur[best] {
			best = i
		}
	}
	cur[best] -= b.total
	return best
}

// usable reports whether t may take this request.
func usable(t *Target, tried []*Target) bool {
	return t.Healthy() && (len(tried) == 0 || !contains(tried, t))
}

// roundRobin takes the next target of the cycle. One that may not take
// the request passes its turn to the next of the cycle; when the next
// few cannot either, the first usable target after the turn's position
// in the list takes it. A retry (tried not empty) looks from the next
// turn without taking it: otherwise a target that fails would be every
// request's first attempt, the retries taking the turns in between.
func (b *balancer) roundRobin(tried []*Target) *Target {
	n := len(b.ts)
	if n == 0 {
		return nil
	}
	var turn uint64
	if len(tried) == 0 {
		turn = b.rr.Add(1) - 1
	} else {
		turn = b.rr.Load()
	}
	var i int
	if b.seq != nil {
		for j := range min(n, len(b.seq)) {
			i = int(b.seq[(turn+uint64(j))%uint64(len(b.seq))])
			if t := b.ts[i]; usable(t, tried) {
				return t
			}
		}
	} else if len(tried) == 0 {
		b.mu.Lock()
		i = b.smooth(b.cur)
		b.mu.Unlock()
		if t := b.ts[i]; usable(t, tried) {
			return t
		}
	} else {
		i = int(turn % uint64(n))
	}
	return b.scan(i, tried)
}

// scan returns the first usable target from position i on, wrapping.
func (b *balancer) scan(i int, tried []*Target) *Target {
	n := len(b.ts)
	for j := range n {
		if t := b.ts[(i+j)%n]; usable(t, tried) {
			return t
		}
	}
	return nil
}

// draw returns the index of a target drawn at random by weight, other
// than skip (-1: none).
func (b *balancer) draw(skip int) int {
	n := len(b.ts)
	if b.cum == nil {
		if skip < 0 {
			return int(b.rnd() % uint64(n))
		}
		i := int(b.rnd() % uint64(n-1))
		if i >= skip {
			i++
		}
		return i
	}
	total := b.total
	if skip >= 0 {
		total -= b.w[skip]
	}
	r := int64(b.rnd() % uint64(total))
	if skip >= 0 && r >= b.cum[skip]-b.w[skip] {
		r += b.w[skip] // past skip's span of the running sums
	}
	lo, hi := 0, n-1
	for lo < hi { // the first i with r < cum[i]
		m := int(uint(lo+hi) >> 1)
		if r < b.cum[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// leastRequest draws two different targets by weight and takes the one
// with fewer requests in flight (the first drawn on a tie): the power of
// two choices, which keeps a slow target from piling up requests without
// the cost of comparing them all; the busiest target is never taken
// while another is usable. When neither drawn target is usable, the
// round robin chooses.
func (b *balancer) leastRequest(tried []*Target) *Target {
	switch len(b.ts) {
	case 0:
		return nil
	case 1:
		return b.scan(0, tried)
	}
	i := b.draw(-1)
	x, y := b.ts[i], b.ts[b.draw(i)]
	xu, yu := usable(x, tried), usable(y, tried)
	switch {
	case xu && yu:
		if y.inflight.Load() < x.inflight.Load() {
			return y
		}
		return x
	case xu:
		return x
	case yu:
		return y
	}
	return b.roundRobin(tried)
}

// hash maps key to a target by weighted rendezvous hashing: every target
// scores the key, w / -ln(u) with u the hash of key and the target's
// address in (0, 1), and the highest usable score wins. A target joining
// or leaving moves only the keys it wins or won, a target that may not
// take the request passes each of its keys to that key's next best
// target, and a target's share of the keys is its share of the weights.
// The cost is one hash per target (one logarithm too when weights
// differ).
func (b *balancer) hash(key uint64, tried []*Target) *Target {
	best, bestScore := -1, -1.0
	var bestHash uint64
	for i, t := range b.ts {
		h := mix(key ^ b.seeds[i])
		if b.equal {
			if best >= 0 && h <= bestHash || !usable(t, tried) {
				continue
			}
			best, bestHash = i, h
			continue
		}
		u := (float64(h>>11) + 0.5) / (1 << 53) // (0, 1)
		s := b.fw[i] / -math.Log(u)
		if s <= bestScore || !usable(t, tried) {
			continue
		}
		best, bestScore = i, s
	}
	if best < 0 {
		return nil
	}
	return b.ts[best]
}

// HashKey returns the hash key of s for Pick: eight bytes at a time
// through a multiply and shift, the tail byte by byte, the length and a
// final mixer, so that keys differing in one byte spread over every bit.
// It is never 0 (Pick's "no key"), and it is the same in every process,
// so that every gateway sends a client to the same target. The whole
// value is hashed: it is bounded by server.max_header_bytes, and
// hashing it costs a fraction of reading it (BENCHMARKS.md).
func HashKey(s string) uint64 {
	const k = 0x9fb21c651e98df25
	h := uint64(14695981039346656037)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h = (h ^ w) * k
		h ^= h >> 29
	}
	for ; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	if h = mix(h ^ uint64(len(s))); h == 0 {
		h = 1
	}
	return h
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
