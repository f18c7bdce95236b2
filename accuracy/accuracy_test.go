package accuracy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var perMinute = ratelimit.Rate{Limit: 100, Window: time.Minute}

func generators() map[string]func(Config) (*Trace, error) {
	return map[string]func(Config) (*Trace, error){
		"poisson": Poisson, "bursty": Bursty, "diurnal": Diurnal, "adversary": Adversary,
	}
}

func TestGeneratorsDeterministic(t *testing.T) {
	c := Config{Seed: 7, Keys: 50, Requests: 20_000, Rate: perMinute}
	for name, gen := range generators() {
		a, err := gen(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := gen(c)
		if !slices.Equal(a.Arrivals, b.Arrivals) {
			t.Errorf("%s: two runs with seed 7 differ", name)
		}
		if name == "adversary" {
			continue // deterministic by construction; the seed does not matter
		}
		c2 := c
		c2.Seed = 8
		d, _ := gen(c2)
		if slices.Equal(a.Arrivals, d.Arrivals) {
			t.Errorf("%s: seeds 7 and 8 give the same trace", name)
		}
	}
}

func TestGeneratorsWellFormed(t *testing.T) {
	c := Config{Seed: 1, Keys: 200, Requests: 50_000, Rate: perMinute}
	for name, gen := range generators() {
		tr, err := gen(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := len(tr.Arrivals)
		// Poisson counts have a standard deviation of √n ≈ 224 here; the
		// bursty and diurnal traces add variance, so allow 10%.
		if n < c.Requests*9/10 || n > c.Requests*11/10 {
			t.Errorf("%s: %d arrivals, want about %d", name, n, c.Requests)
		}
		if !slices.IsSortedFunc(tr.Arrivals, func(a, b Arrival) int { return int(a.At - b.At) }) {
			t.Errorf("%s: arrivals not sorted by time", name)
		}
		for _, a := range tr.Arrivals {
			if int(a.Key) >= tr.Keys || a.Cost < 1 || int64(a.Cost) > perMinute.Limit || a.At < Origin {
				t.Fatalf("%s: bad arrival %+v (keys %d)", name, a, tr.Keys)
			}
		}
	}
}

func TestPoissonRateAndCosts(t *testing.T) {
	c := Config{Seed: 3, Keys: 100, Requests: 100_000, Rate: perMinute}
	tr, err := Poisson(c)
	if err != nil {
		t.Fatal(err)
	}
	var costly int
	for _, a := range tr.Arrivals {
		if a.Cost > 1 {
			costly++
		}
	}
	share := float64(costly) / float64(len(tr.Arrivals))
	if share < 0.04 || share > 0.06 {
		t.Errorf("share of costly requests = %.4f, want about 0.05", share)
	}
	// n ~ Poisson(100000): 3% is more than 9 standard deviations.
	if n := len(tr.Arrivals); n < 97_000 || n > 103_000 {
		t.Errorf("%d arrivals, want 100000 ± 3%%", n)
	}
}

func TestDiurnalHasDayAndNight(t *testing.T) {
	tr, err := Diurnal(Config{Seed: 5, Keys: 100, Requests: 100_000, Rate: perMinute})
	if err != nil {
		t.Fatal(err)
	}
	start, end := tr.Arrivals[0].At, tr.Arrivals[len(tr.Arrivals)-1].At
	q := (end - start) / 8
	var night, noon int
	for _, a := range tr.Arrivals {
		switch {
		case a.At < start+q: // first eighth: rate ≤ 1 − 0.8·cos(π/4) ≈ 0.43
			night++
		case a.At >= start+7*q/2 && a.At < start+9*q/2: // around noon: ≥ 1.77
			noon++
		}
	}
	if noon < 3*night {
		t.Errorf("noon slice has %d arrivals, night slice %d: want noon ≥ 3× night", noon, night)
	}
}

func TestAdversaryShape(t *testing.T) {
	r := ratelimit.Rate{Limit: 10, Window: time.Second}
	tr, err := Adversary(Config{Keys: 3, Requests: 3 * 2 * 10 * 30, Rate: r})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Keys != 3 || len(tr.Arrivals) != 1800 {
		t.Fatalf("keys %d, arrivals %d; want 3, 1800", tr.Keys, len(tr.Arrivals))
	}
	w := int64(r.Window / ratelimit.Tick)
	delta := w / 64
	for _, a := range tr.Arrivals {
		off := a.At % w // distance past the last boundary
		if off >= delta && off < w-2*delta {
			t.Fatalf("arrival %+v is %d ticks past a boundary: not aimed at one", a, off)
		}
	}
	// Too few requests for every key: fewer keys, still 20 windows.
	tr, err = Adversary(Config{Keys: 1000, Requests: 4000, Rate: r})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Keys != 10 || len(tr.Arrivals) != 4000 {
		t.Errorf("keys %d, arrivals %d; want 10, 4000", tr.Keys, len(tr.Arrivals))
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := Poisson(Config{}); err == nil {
		t.Error("Poisson with no rate: want an error")
	}
	if _, err := Adversary(Config{Rate: perMinute, Slot: time.Hour}); err == nil {
		t.Error("slot longer than the window: want an error")
	}
}

func limit(t *testing.T, a ratelimit.Algorithm, r ratelimit.Rate, precision time.Duration) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: "t", Algorithm: a, Rates: []ratelimit.Rate{r}, Precision: precision}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// trace builds a one-key trace of cost-1 arrivals at the given ticks.
func trace(ticks ...int64) *Trace {
	tr := &Trace{Name: "hand", Keys: 1}
	for _, at := range ticks {
		tr.Arrivals = append(tr.Arrivals, Arrival{At: at, Cost: 1})
	}
	return tr
}

func TestEvaluateKnownAnswers(t *testing.T) {
	two := ratelimit.Rate{Limit: 2, Window: 10 * time.Microsecond} // 2 per 10 ticks
	one := ratelimit.Rate{Limit: 1, Window: 10 * time.Microsecond}
	tests := []struct {
		name string
		l    *ratelimit.Limit
		tr   *Trace
		want Result
	}{{
		// Fixed window [0,10) then [10,20): all four allowed. The exact
		// log, fed that history, holds 8,9 at tick 10 and 8,9,10 at 11:
		// two false allows, four units in (1, 11].
		name: "fixed window boundary burst",
		l:    limit(t, ratelimit.FixedWindow, two, 0),
		tr:   trace(8, 9, 10, 11),
		want: Result{Requests: 4, Allowed: 4, FalseAllows: 2, WorstExcess: 2},
	}, {
		// Counter, 1 per 10: tick 9 allowed; tick 10 weighs bucket 0
		// fully (denied, and the log agrees); at tick 19 the estimate is
		// 1·(10−9)/10 + 0 = 0.1, and 0.1 + 1 > 1 denies, while the unit
		// at 9 has left the window (9 ≤ 19 − 10): a false deny.
		name: "counter undercounts nothing, overcounts a leaving unit",
		l:    limit(t, ratelimit.SlidingWindowCounter, one, 0),
		tr:   trace(9, 10, 19),
		want: Result{Requests: 3, Allowed: 1, FalseDenies: 1},
	}, {
		// Counter with 1-tick buckets: at offset 0 the oldest bucket
		// (tick 9 at now = 19) still weighs fully, so 19 is a false deny
		// here too; at 20 it has left.
		name: "counter with tick precision",
		l:    limit(t, ratelimit.SlidingWindowCounter, one, time.Microsecond),
		tr:   trace(9, 10, 19, 20),
		want: Result{Requests: 4, Allowed: 2, FalseDenies: 1},
	}, {
		// Token bucket, burst 2, refill 2 per 10 ticks: full at 0, takes 2
		// at 0 and 1 more at 5 (refilled 1): the log denies it.
		name: "token bucket refill inside the window",
		l:    limit(t, ratelimit.TokenBucket, two, 0),
		tr:   trace(0, 0, 5),
		want: Result{Requests: 3, Allowed: 3, FalseAllows: 1, WorstExcess: 1},
	}, {
		// The exact log against itself: never wrong, never over.
		name: "log against itself",
		l:    limit(t, ratelimit.SlidingWindowLog, two, 0),
		tr:   trace(0, 1, 2, 9, 10, 11, 12, 20, 21),
		want: Result{Requests: 9, Allowed: 6}, // 0, 1, 10, 11, 20, 21
	}}
	for _, tc := range tests {
		got, err := Evaluate(tc.tr, tc.l)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tc.want.Trace, tc.want.Algorithm = "hand", Label(tc.l)
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestEvaluateKeepsKeysApart(t *testing.T) {
	one := ratelimit.Rate{Limit: 1, Window: 10 * time.Microsecond}
	tr := &Trace{Name: "two keys", Keys: 2, Arrivals: []Arrival{
		{At: 0, Key: 0, Cost: 1}, {At: 1, Key: 1, Cost: 1}, {At: 2, Key: 0, Cost: 1}, {At: 3, Key: 1, Cost: 1},
	}}
	got, err := Evaluate(tr, limit(t, ratelimit.FixedWindow, one, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Allowed != 2 || got.Errors() != 0 {
		t.Errorf("got %+v, want 2 allowed (one per key), no errors", got)
	}
}

func TestEvaluateRejects(t *testing.T) {
	tr := trace(1)
	if _, err := Evaluate(tr, &ratelimit.Limit{Algorithm: ratelimit.FixedWindow}); err == nil {
		t.Error("unfinished limit: want an error")
	}
	l := &ratelimit.Limit{Name: "c", Algorithm: ratelimit.Concurrency, MaxInFlight: 1}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := Evaluate(tr, l); err == nil {
		t.Error("concurrency: want an error")
	}
}

func TestSuiteSmall(t *testing.T) {
	s := Suite{Config: Config{Seed: 1, Keys: 20, Requests: 20_000, Rate: perMinute},
		Precision: time.Second, Workers: 2}
	rs, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5*7 {
		t.Fatalf("%d results, want 35 (5 traces × 7 limits)", len(rs))
	}
	for _, r := range rs {
		if r.Algorithm == "sliding_window_log" && (r.Errors() != 0 || r.WorstExcess != 0) {
			t.Errorf("%s: the exact log disagrees with itself: %+v", r.Trace, r)
		}
		if r.Algorithm == "fixed_window_elastic" && r.FalseAllows != 0 {
			// Elastic never admits more than L in [now−W, now]: its box
			// holds every allowed unit for at least W.
			t.Errorf("%s: elastic window false-allowed: %+v", r.Trace, r)
		}
	}
	var b strings.Builder
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "\n"); got != 2+35 {
		t.Errorf("table has %d lines, want 37", got)
	}
}
