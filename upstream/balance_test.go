package upstream

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// testPool returns a Pool of balance b over targets with the given
// weights (addresses 10.0.0.1, 10.0.0.2, ...), least request drawing from
// a fixed seed.
func testPool(b Balance, weights ...int) *Pool {
	s := &Spec{Balance: b}
	for i, w := range weights {
		u, _ := url.Parse(fmt.Sprintf("http://10.0.%d.%d:80", i/250, i%250+1))
		s.Targets = append(s.Targets, TargetSpec{URL: u, Weight: w})
	}
	p := newPool("r", s)
	p.rand = rand.New(rand.NewPCG(1, 2)).Uint64
	return p
}

func index(p *Pool, t *Target) int {
	for i, x := range p.Targets() {
		if x == t {
			return i
		}
	}
	return -1
}

// A cycle of the round robin (the weights' sum over their greatest
// common divisor) takes each target exactly as often as its weight says,
// for precomputed cycles and for those walked under the lock.
func TestRoundRobinCycleMatchesWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := [][]int{{1}, {1, 1}, {5, 1, 1}, {2, 4, 6}, {1000, 1}, {3, 3, 3, 3, 7}}
	for range 20 {
		n := 1 + r.IntN(12)
		w := make([]int, n)
		for i := range w {
			w[i] = 1 + r.IntN(50)
		}
		cases = append(cases, w)
	}
	// Longer than maxCycle: walked under the lock.
	cases = append(cases, []int{1000, 999, 998, 997, 996, 995, 994, 993, 992, 991})
	for _, w := range cases {
		p := testPool(RoundRobin, w...)
		g := 0
		sum := 0
		for _, x := range w {
			g = int(gcd(int64(g), int64(x)))
			sum += x
		}
		cycle := sum / g
		got := make([]int, len(w))
		for range 2 * cycle {
			got[index(p, p.Pick(0, nil))]++
		}
		for i := range w {
			if want := 2 * w[i] / g; got[i] != want {
				t.Fatalf("weights %v: two cycles took target %d %d times, want %d (all: %v)", w, i, got[i], want, got)
			}
		}
	}
}

// The round robin spreads a target's turns: with weights 5, 1, 1 the
// two light targets never take turns back to back (a plain weighted
// rotation, a a a a a b c, would).
func TestRoundRobinSmooth(t *testing.T) {
	p := testPool(RoundRobin, 5, 1, 1)
	prev := 0
	for k := range 70 {
		i := index(p, p.Pick(0, nil))
		if i != 0 && prev != 0 {
			t.Fatalf("pick %d: targets %d and %d back to back", k, prev, i)
		}
		prev = i
	}
}

// A target that is not healthy, or was tried, is skipped; when none is
// left, Pick returns nil.
func TestPickSkipsUnusable(t *testing.T) {
	for _, b := range []Balance{RoundRobin, LeastRequest, Hash} {
		t.Run(b.String(), func(t *testing.T) {
			p := testPool(b, 5, 1, 1)
			ts := p.Targets()
			ts[0].unhealthy.Store(true)
			for i := range 1000 {
				got := p.Pick(HashKey(fmt.Sprint(i)), ts[1:2])
				if got != ts[2] {
					t.Fatalf("pick %d: got target %d, want the only usable one (2)", i, index(p, got))
				}
			}
			if got := p.Pick(7, ts[1:]); got != nil {
				t.Fatalf("no usable target: got %d, want nil", index(p, got))
			}
			ts[0].unhealthy.Store(false)
			if got := p.Pick(7, ts[1:]); got != ts[0] {
				t.Fatalf("got %d, want 0", index(p, got))
			}
		})
	}
}

// Least request: with target i having i requests in flight (8 targets of
// one weight), the power of two choices (two different targets drawn,
// the less busy wins) takes target i when the other drawn is busier:
// with probability (n-1-i) / C(n, 2), and the busiest never. Fixed seed:
// the frequencies are the same on every run.
func TestLeastRequestTwoChoices(t *testing.T) {
	const n, picks = 8, 84000
	for _, weighted := range []bool{false, true} {
		w := []int{1, 1, 1, 1, 1, 1, 1, 1}
		busiest := n - 1
		if weighted {
			w = []int{2, 2, 2, 4, 2, 2, 1, 3}
			busiest = 3 // the heaviest
		}
		p := testPool(LeastRequest, w...)
		for i, x := range p.Targets() {
			x.inflight.Store(int64(i))
		}
		p.Targets()[busiest].inflight.Store(100)
		got := make([]int, n)
		for range picks {
			got[index(p, p.Pick(0, nil))]++
		}
		if got[busiest] != 0 {
			t.Fatalf("weights %v: the busiest target was taken %d times", w, got[busiest])
		}
		if weighted {
			continue
		}
		for i := range n {
			want := float64(n-1-i) / (n * (n - 1) / 2)
			if f := float64(got[i]) / picks; f < want-0.01 || f > want+0.01 {
				t.Errorf("target %d (in flight %d): share %.4f, want %.4f", i, i, f, want)
			}
		}
	}
}

// Least request draws by weight: with nothing in flight (the first drawn
// wins a tie) the shares are the weights'.
func TestLeastRequestWeights(t *testing.T) {
	w := []int{1, 2, 3, 4}
	p := testPool(LeastRequest, w...)
	const picks = 100000
	got := make([]int, len(w))
	for range picks {
		got[index(p, p.Pick(0, nil))]++
	}
	for i := range w {
		want := float64(w[i]) / 10
		if f := float64(got[i]) / picks; f < want-0.01 || f > want+0.01 {
			t.Errorf("target %d (weight %d): share %.4f, want %.2f", i, w[i], f, want)
		}
	}
}

func owners(p *Pool, keys int) []string {
	out := make([]string, keys)
	for k := range keys {
		out[k] = p.Pick(HashKey(fmt.Sprint("client-", k)), nil).Name
	}
	return out
}

// Removing one of N targets moves exactly the keys it had, each to the
// target the key would fall to while it is unhealthy; adding a target
// moves only keys to it, about 1/(N+1) of them. The new list replaces
// the old one in the same Pool, as DNS replaces it.
func TestHashMovesOnlyItsShare(t *testing.T) {
	const keys = 10000
	for _, weights := range [][]int{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 5, 2, 8, 3, 1, 1, 4}} {
		p := testPool(Hash, weights...)
		before := owners(p, keys)
		all := p.Targets()
		for gone := range all {
			// Unhealthy: its keys fall to their next target.
			all[gone].unhealthy.Store(true)
			down := owners(p, keys)
			all[gone].unhealthy.Store(false)
			// Removed from the list.
			rest := append(append([]*Target(nil), all[:gone]...), all[gone+1:]...)
			p.setTargets(rest)
			after := owners(p, keys)
			p.setTargets(all)
			moved := 0
			for k := range keys {
				switch {
				case before[k] != all[gone].Name && after[k] != before[k]:
					t.Fatalf("weights %v, target %d removed: key %d moved from %s to %s", weights, gone, k, before[k], after[k])
				case before[k] == all[gone].Name:
					moved++
					if after[k] == all[gone].Name {
						t.Fatalf("key %d still on the removed target", k)
					}
				}
				if down[k] != after[k] {
					t.Fatalf("key %d: %s while the target is unhealthy, %s once it is removed", k, down[k], after[k])
				}
			}
			if moved == 0 {
				t.Fatalf("target %d had no keys", gone)
			}
		}
		// Adding a target of weight 1.
		u, _ := url.Parse("http://10.9.9.9:80")
		p.setTargets(append(append([]*Target(nil), all...), &Target{URL: u, Name: u.String(), Weight: 1}))
		after := owners(p, keys)
		moved := 0
		for k := range keys {
			if after[k] != before[k] {
				moved++
				if after[k] != u.String() {
					t.Fatalf("key %d moved from %s to %s, not to the new target", k, before[k], after[k])
				}
			}
		}
		sum := 1
		for _, w := range weights {
			sum += w
		}
		if share, want := float64(moved)/keys, 1/float64(sum); share > want+0.02 {
			t.Fatalf("weights %v: adding a target of weight 1 moved %.3f of the keys, want about %.3f", weights, share, want)
		}
	}
}

// Each target's share of the keys is its share of the weights.
func TestHashWeights(t *testing.T) {
	w := []int{1, 2, 3, 4}
	p := testPool(Hash, w...)
	const keys = 40000
	got := map[string]int{}
	for _, o := range owners(p, keys) {
		got[o]++
	}
	for i, x := range p.Targets() {
		want := float64(w[i]) / 10
		if f := float64(got[x.Name]) / keys; f < want-0.015 || f > want+0.015 {
			t.Errorf("target %d (weight %d): share %.4f, want %.2f", i, w[i], f, want)
		}
	}
}

// Hostile hash keys: any length and any bytes hash (the whole value: its
// length is bounded by the server's header limit, and hashing is cheaper
// than reading it was), to the same key every time, never 0.
func TestHashKeyHostile(t *testing.T) {
	for _, s := range []string{"", "\x00", strings.Repeat("a", 1<<20), strings.Repeat("\xff", 4096), "ü\r\n"} {
		k := HashKey(s)
		if k == 0 || k != HashKey(s) {
			t.Fatalf("HashKey(%.10q...) = %d", s, k)
		}
	}
	// Values differing only in their last byte go to different keys.
	long := strings.Repeat("x", 1<<20)
	if HashKey(long+"a") == HashKey(long+"b") {
		t.Fatal("1 MiB values differing in the last byte hash alike")
	}
}

func BenchmarkPick(b *testing.B) {
	for _, bal := range []Balance{RoundRobin, LeastRequest, Hash} {
		for _, n := range []int{2, 8, 100} {
			for _, weighted := range []bool{false, true} {
				w := make([]int, n)
				for i := range w {
					w[i] = 1
					if weighted {
						w[i] = 1 + i%5
					}
				}
				name := fmt.Sprintf("%s/%d", bal, n)
				if weighted {
					name += "/weighted"
				}
				// One goroutine, Pick alone: the algorithm's cost (the
				// in-flight counts that Begin and End keep are atomics
				// shared by every request, in proxy's benchmarks).
				b.Run(name, func(b *testing.B) {
					p := testPool(bal, w...)
					p.rand = nil
					key := HashKey("client")
					for b.Loop() {
						p.Pick(key, nil)
						key = mix(key)
					}
				})
			}
		}
	}
}

func BenchmarkHashKey1MiB(b *testing.B) {
	s := strings.Repeat("k", 1<<20)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		HashKey(s)
	}
}
