package ratelimit

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The root contract's small functions, each against a hand-written table.

func TestAlgorithmNames(t *testing.T) {
	names := map[string]Algorithm{
		"fixed_window": FixedWindow, "fixed_window_elastic": FixedWindowElastic,
		"sliding_window_log": SlidingWindowLog, "sliding_window_counter": SlidingWindowCounter,
		"token_bucket": TokenBucket, "gcra": GCRA, "concurrency": Concurrency, "quota": Quota,
	}
	for name, a := range names {
		got, err := ParseAlgorithm(name)
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", name, got, err, a)
		}
		if a.String() != name {
			t.Errorf("%d.String() = %q, want %q", a, a.String(), name)
		}
	}
	for _, bad := range []string{"", "Fixed_Window", "leaky_bucket", "Algorithm(1)"} {
		if a, err := ParseAlgorithm(bad); err == nil || !strings.Contains(err.Error(), "unknown algorithm") {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want an unknown-algorithm error", bad, a, err)
		}
	}
	for _, a := range []Algorithm{0, 10, 200} {
		if want := "Algorithm(" + map[Algorithm]string{0: "0", 10: "10", 200: "200"}[a] + ")"; a.String() != want {
			t.Errorf("Algorithm %d String = %q, want %q", a, a.String(), want)
		}
	}
	want := []Algorithm{FixedWindow, FixedWindowElastic, SlidingWindowLog, SlidingWindowCounter, TokenBucket, GCRA, Concurrency, Quota, Distinct}
	if got := Algorithms(); !slices.Equal(got, want) {
		t.Errorf("Algorithms() = %v, want %v", got, want)
	}
	for _, a := range want {
		if a.Exact() != (a != SlidingWindowCounter && a != Distinct) {
			t.Errorf("%s.Exact() = %v", a, a.Exact())
		}
	}
}

func TestLimitValidate(t *testing.T) {
	r := func(n int64, w time.Duration) Rate { return Rate{Limit: n, Window: w} }
	for _, tc := range []struct {
		name string
		l    Limit
		err  string // "" = valid
	}{
		{"fixed window", Limit{Algorithm: FixedWindow, Rates: []Rate{r(10, time.Second)}}, ""},
		{"two rates", Limit{Algorithm: SlidingWindowLog, Rates: []Rate{r(10, time.Second), r(100, time.Minute)}}, ""},
		{"no algorithm", Limit{Rates: []Rate{r(1, time.Second)}}, "unknown algorithm 0"},
		{"algorithm out of range", Limit{Algorithm: 42, Rates: []Rate{r(1, time.Second)}}, "unknown algorithm 42"},
		{"concurrency", Limit{Algorithm: Concurrency, MaxInFlight: 3}, ""},
		{"concurrency with rates", Limit{Algorithm: Concurrency, MaxInFlight: 3, Rates: []Rate{r(1, time.Second)}}, "not rates"},
		{"concurrency without slots", Limit{Algorithm: Concurrency}, "max_in_flight must be in 1..2^53, got 0"},
		{"concurrency above 2^53", Limit{Algorithm: Concurrency, MaxInFlight: MaxLimit + 1}, "max_in_flight must be"},
		{"max_in_flight on a rate limit", Limit{Algorithm: GCRA, MaxInFlight: 2, Rates: []Rate{r(1, time.Second)}}, "only to the concurrency"},
		{"no rate", Limit{Algorithm: TokenBucket}, "at least one rate"},
		{"zero rate", Limit{Algorithm: TokenBucket, Rates: []Rate{r(0, time.Second)}}, "count must be positive, got 0"},
		{"burst on token_bucket", Limit{Algorithm: TokenBucket, Burst: 5, Rates: []Rate{r(1, time.Second)}}, ""},
		{"burst on gcra", Limit{Algorithm: GCRA, Burst: 5, Rates: []Rate{r(1, time.Second)}}, ""},
		{"burst on fixed_window", Limit{Algorithm: FixedWindow, Burst: 5, Rates: []Rate{r(1, time.Second)}}, "burst applies only"},
		{"burst with two rates", Limit{Algorithm: GCRA, Burst: 5, Rates: []Rate{r(1, time.Second), r(10, time.Minute)}}, "exactly one rate"},
		{"negative burst", Limit{Algorithm: GCRA, Burst: -1, Rates: []Rate{r(1, time.Second)}}, "burst must be in 1..2^53, got -1"},
		{"precision", Limit{Algorithm: SlidingWindowCounter, Precision: time.Second, Rates: []Rate{r(10, time.Minute)}}, ""},
		{"precision on the log", Limit{Algorithm: SlidingWindowLog, Precision: time.Second, Rates: []Rate{r(10, time.Minute)}}, "precision applies only"},
		{"sub-tick precision", Limit{Algorithm: SlidingWindowCounter, Precision: 1500 * time.Nanosecond, Rates: []Rate{r(10, time.Minute)}}, "whole number of microseconds"},
		{"negative precision", Limit{Algorithm: SlidingWindowCounter, Precision: -time.Second, Rates: []Rate{r(10, time.Minute)}}, "whole number of microseconds"},
		{"precision not dividing", Limit{Algorithm: SlidingWindowCounter, Precision: 7 * time.Second, Rates: []Rate{r(10, time.Minute)}}, "does not divide"},
		{"too many buckets", Limit{Algorithm: SlidingWindowCounter, Precision: time.Millisecond, Rates: []Rate{r(10, time.Minute)}}, "more than 3600 buckets"},
	} {
		err := tc.l.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
}

func TestHitCheck(t *testing.T) {
	finished := &Limit{Name: "f", Algorithm: FixedWindow, Rates: []Rate{{Limit: 1, Window: time.Second}}}
	if err := finished.Finish(); err != nil {
		t.Fatal(err)
	}
	raw := &Limit{Name: "raw", Algorithm: FixedWindow, Rates: []Rate{{Limit: 1, Window: time.Second}}}
	for _, tc := range []struct {
		h   Hit
		err string
	}{
		{Hit{Limit: finished, Cost: 1}, ""},
		{Hit{Limit: finished, Cost: 1 << 40}, ""}, // above capacity is a decision (Never), not a bug
		{Hit{Cost: 1}, "nil limit"},
		{Hit{Limit: raw, Cost: 1}, `limit "raw" not finished`},
		{Hit{Limit: finished, Cost: 0}, "cost 0 < 1"},
		{Hit{Limit: finished, Cost: -3}, "cost -3 < 1"},
	} {
		err := tc.h.Check()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Check(%+v) = %v, want %q", tc.h, err, tc.err)
		}
	}
}

func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		i    int
		want int64
	}{
		{Limit{Algorithm: FixedWindow, Rates: []Rate{{Limit: 10, Window: time.Second}, {Limit: 100, Window: time.Minute}}}, 1, 100},
		{Limit{Algorithm: TokenBucket, Rates: []Rate{{Limit: 10, Window: time.Second}}}, 0, 10},
		{Limit{Algorithm: TokenBucket, Burst: 3, Rates: []Rate{{Limit: 10, Window: time.Second}}}, 0, 3},
		{Limit{Algorithm: GCRA, Burst: 25, Rates: []Rate{{Limit: 10, Window: time.Second}}}, 0, 25},
		{Limit{Algorithm: Concurrency, MaxInFlight: 4}, 0, 4},
	} {
		if got := tc.l.Capacity(tc.i); got != tc.want {
			t.Errorf("%s burst %d: Capacity(%d) = %d, want %d", tc.l.Algorithm, tc.l.Burst, tc.i, got, tc.want)
		}
	}
}
