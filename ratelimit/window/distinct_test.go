package window

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// naiveDistinct is the model a distinct window is held to in its exact
// range: every admitted (value, instant), and the definition read
// literally: at now, a value counts when it was admitted at an instant
// whose sub-window floor(t/P) is one of the N sub-windows ending with
// now's.
type naiveDistinct struct {
	p      time.Duration // sub-window width
	n      int64         // sub-windows per window
	events []struct {
		v  uint64
		at int64
	}
}

func (m *naiveDistinct) set(now int64) map[uint64]bool {
	P := int64(m.p / ratelimit.Tick)
	cur := now / P
	s := map[uint64]bool{}
	for _, e := range m.events {
		if e.at/P > cur-m.n && e.at/P <= cur {
			s[e.v] = true
		}
	}
	return s
}

// decide is the model's decision for v at now, and its wait when denied:
// the first later sub-window start at which fewer than L values count.
func (m *naiveDistinct) decide(now, limit int64, v uint64) (bool, int64) {
	s := m.set(now)
	if s[v] || int64(len(s)) < limit {
		return true, 0
	}
	P := int64(m.p / ratelimit.Tick)
	for b := now/P + 1; ; b++ {
		if int64(len(m.set(b*P))) < limit {
			return false, b*P - now
		}
	}
}

func distinctLimit(t testing.TB, limit int64, window, precision time.Duration) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: "d", Algorithm: ratelimit.Distinct, Precision: precision,
		Rates: []ratelimit.Rate{{Limit: limit, Window: window}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDistinctMatchesNaiveModel drives random sequences through a
// DistinctState within the exact range (L ≤ DistinctExact, so it never
// estimates) and holds every decision, wait and remaining count to the
// naive model.
func TestDistinctMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		limit := 1 + r.Int64N(ratelimit.DistinctExact)
		n := 1 + r.Int64N(6)
		prec := time.Duration(1+r.Int64N(50)) * time.Millisecond
		l := distinctLimit(t, limit, prec*time.Duration(n), prec)
		p := l.Params(0)
		model := &naiveDistinct{p: prec, n: n}
		universe := 1 + r.Int64N(2*limit+3)
		now := int64(1_702_080_000_000_000)
		var s DistinctState
		s.Init(&p, now)
		for step := range 3000 {
			now += r.Int64N(int64(prec/ratelimit.Tick) / 2)
			v := uint64(r.Int64N(universe)) * 0x9e3779b97f4a7c15
			ok, ra := s.Allow(&p, now, v)
			wok, wra := model.decide(now, limit, v)
			if ok != wok || ra != wra {
				t.Fatalf("seed %d step %d: Allow = %v, %d; model %v, %d", seed, step, ok, ra, wok, wra)
			}
			if ok {
				s.Take(&p, now, v)
				model.events = append(model.events, struct {
					v  uint64
					at int64
				}{v, now})
			}
			if got, want := s.Remaining(&p, now), limit-int64(len(model.set(now))); got != max(want, 0) {
				t.Fatalf("seed %d step %d: Remaining = %d, model %d", seed, step, got, want)
			}
			if s.HLL != nil {
				t.Fatalf("seed %d: estimated below the exact threshold", seed)
			}
		}
	}
}

// TestDistinctEstimateAccuracy checks the estimate past the exact range
// within 4 standard errors (1.04/√2^p ≈ 0.81%) at a few cardinalities.
func TestDistinctEstimateAccuracy(t *testing.T) {
	l := distinctLimit(t, ratelimit.DistinctMaxLimit, time.Hour, 0)
	l.Rates[0].Limit = 1 << 40 // the count only
	p := l.Params(0)
	now := int64(1_702_080_000_000_000)
	r := rand.New(rand.NewPCG(1, 2))
	var s DistinctState
	s.Init(&p, now)
	added := 0
	for _, n := range []int{200, 1000, 10_000, 100_000} {
		for added < n {
			s.Take(&p, now, r.Uint64())
			added++
		}
		got := s.Count(&p, now)
		if err := float64(got-int64(n)) / float64(n); err > 0.0325 || err < -0.0325 {
			t.Errorf("estimate of %d = %d (%.2f%%)", n, got, 100*err)
		}
	}
}

// TestDistinctEstimateSlides checks that estimated values leave with
// their sub-window: the state empties one window after the last value.
func TestDistinctEstimateSlides(t *testing.T) {
	l := distinctLimit(t, 1000, 4*time.Second, time.Second)
	p := l.Params(0)
	now := int64(1_702_080_000_000_000)
	r := rand.New(rand.NewPCG(3, 4))
	var s DistinctState
	s.Init(&p, now)
	for range 500 {
		s.Take(&p, now, r.Uint64())
	}
	now += int64(time.Second / ratelimit.Tick)
	for range 500 {
		s.Take(&p, now, r.Uint64())
	}
	if s.HLL == nil {
		t.Fatal("1000 values and still exact")
	}
	if c := s.Count(&p, now); c < 950 || c > 1050 {
		t.Fatalf("count = %d, want about 1000", c)
	}
	now += 3 * int64(time.Second/ratelimit.Tick)
	if c := s.Count(&p, now); c < 470 || c > 530 {
		t.Fatalf("after the first sub-window left: count = %d, want about 500", c)
	}
	now += int64(time.Second / ratelimit.Tick)
	if c := s.Count(&p, now); c != 0 || s.HLL != nil {
		t.Fatalf("one window after the last value: count = %d, estimated %v", c, s.HLL != nil)
	}
}

// FuzzDistinctExact holds a DistinctState in its exact range to the naive
// model on fuzzed sequences: 2 bytes per request, a time step of up to 255
// ticks × 1,000 and a value of 0..15; the limit and the sub-windows come
// from the first bytes.
func FuzzDistinctExact(f *testing.F) {
	f.Add([]byte{3, 2, 1, 1, 2, 2, 3, 3, 4, 4, 200, 1, 0, 5})
	f.Add([]byte{1, 1, 0, 0, 0, 1, 255, 1, 0, 1})
	f.Add([]byte{16, 4, 10, 1, 10, 2, 10, 3, 10, 4, 10, 5, 90, 6, 90, 7, 250, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		limit := 1 + int64(data[0]%16)
		n := 1 + int64(data[1]%6)
		prec := 50 * time.Millisecond
		l := distinctLimit(t, limit, prec*time.Duration(n), prec)
		p := l.Params(0)
		model := &naiveDistinct{p: prec, n: n}
		now := int64(1_702_080_000_000_000)
		var s DistinctState
		s.Init(&p, now)
		for data = data[2:]; len(data) >= 2 && len(model.events) < 300; data = data[2:] {
			now += int64(data[0]) * 1000
			v := uint64(data[1]%16+1) * 0x9e3779b97f4a7c15
			ok, ra := s.Allow(&p, now, v)
			wok, wra := model.decide(now, limit, v)
			if ok != wok || ra != wra {
				t.Fatalf("Allow = %v, %d; model %v, %d", ok, ra, wok, wra)
			}
			if ok {
				s.Take(&p, now, v)
				model.events = append(model.events, struct {
					v  uint64
					at int64
				}{v, now})
			}
		}
	})
}
