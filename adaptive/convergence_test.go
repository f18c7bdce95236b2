package adaptive_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/adaptive"
)

// TestConvergence is the limit's convergence property against a simulated
// queue: for random capacities C, service times and seeds, under a closed
// loop of 8·C clients the learned limit settles near C (the upstream kept
// busy, its queue short), follows the capacity down within 5s when it
// halves and back up within 10s when it doubles again. The oracle is the
// queue itself: goodput is counted from completions and latency measured
// from arrival to end, not derived from the limiter's formula.
func TestConvergence(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 29))
	trials := 8
	if raceEnabled {
		trials = 2
	}
	for trial := range trials {
		c := 8 + rng.IntN(57)                                       // 8..64
		service := time.Duration(5+rng.IntN(46)) * time.Millisecond // 5..50ms
		seed := rng.Uint64()
		t.Run(fmt.Sprintf("C=%d,S=%v", c, service), func(t *testing.T) {
			t.Parallel()
			checkConvergence(t, c, service, seed, trial)
		})
	}
}

func checkConvergence(t *testing.T, c int, service time.Duration, seed uint64, trial int) {
	s := newSim(adaptive.Config{MinLimit: 2, MaxLimit: 1000, Seed: seed}, c, service, 8*c, seed)
	at := func(d time.Duration) time.Time { return s.t0.Add(d) }

	// Settled: 10s of warm-up, then 10s measured.
	s.run(at(10*time.Second), nil)
	s.record()
	var sum float64
	var n int
	s.run(at(20*time.Second), func(time.Time) { sum += s.l.Stats().Limit; n++ })
	mean := sum / float64(n)
	goodput := float64(s.done) / 10 // per second
	ideal := float64(c) / service.Seconds()
	if mean < 0.9*float64(c) || mean > 1.6*float64(c)+4 {
		t.Errorf("settled limit %.1f for capacity %d, want within [0.9C, 1.6C+4]", mean, c)
	}
	if goodput < 0.9*ideal {
		t.Errorf("goodput %.0f/s, want ≥ 0.9 × %.0f/s (the upstream's capacity)", goodput, ideal)
	}
	if p := p99(s.latencies); p > 2*service {
		t.Errorf("p99 latency of admitted requests %v, want ≤ 2 × service time %v", p, service)
	}

	// The capacity halves: within 5s the limit is at most 1.6·C/2 + 4.
	half := c / 2
	s.capacity = half
	followed := time.Duration(-1)
	s.run(at(35*time.Second), func(now time.Time) {
		if followed < 0 && s.l.Stats().Limit <= 1.6*float64(half)+4 {
			followed = now.Sub(at(20 * time.Second))
		}
	})
	if followed < 0 || followed > 5*time.Second {
		t.Errorf("capacity %d→%d: limit followed after %v, want ≤ 5s (limit now %.1f)", c, half, followed, s.l.Stats().Limit)
	}

	// And doubles back: within 10s the limit is at least 0.9·C.
	s.capacity = c
	followed = -1
	s.run(at(50*time.Second), func(now time.Time) {
		if followed < 0 && s.l.Stats().Limit >= 0.9*float64(c) {
			followed = now.Sub(at(35 * time.Second))
		}
	})
	if followed < 0 || followed > 10*time.Second {
		t.Errorf("capacity %d→%d: limit followed after %v, want ≤ 10s (limit now %.1f)", half, c, followed, s.l.Stats().Limit)
	}
	if testing.Verbose() {
		t.Logf("settled limit %.1f, goodput %.0f/s of %.0f/s, p99 %v; followed down and up", mean, goodput, ideal, p99(s.latencies))
	}
}
