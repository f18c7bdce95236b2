package ratelimit_test

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestLimitID: a limit's ID names its counters. It stays when a reload
// changes only the numbers that judge the usage (counts, burst,
// max_in_flight), so the usage carries over; it changes with anything that
// decides which counters exist or how their state is laid out.
func TestLimitID(t *testing.T) {
	base := func() ratelimit.Limit {
		return ratelimit.Limit{Name: "l", Algorithm: ratelimit.TokenBucket, Scope: "by=client",
			Rates: []ratelimit.Rate{{Limit: 10, Window: time.Minute}}, Burst: 10}
	}
	counter := func() ratelimit.Limit {
		return ratelimit.Limit{Name: "l", Algorithm: ratelimit.SlidingWindowCounter,
			Rates: []ratelimit.Rate{{Limit: 10, Window: time.Minute}}}
	}
	// two and quota list their rates in the order given: Finish sorts
	// them, so the order they are listed in is no part of the ID.
	two := func(w1, w2 time.Duration) func() ratelimit.Limit {
		return func() ratelimit.Limit {
			return ratelimit.Limit{Name: "l", Algorithm: ratelimit.FixedWindow,
				Rates: []ratelimit.Rate{{Limit: 2, Window: w1}, {Limit: 100, Window: w2}}}
		}
	}
	quota := func(w1, w2 time.Duration) func() ratelimit.Limit {
		return func() ratelimit.Limit {
			return ratelimit.Limit{Name: "l", Algorithm: ratelimit.Quota,
				Rates: []ratelimit.Rate{{Limit: 5, Window: w1}, {Limit: 100, Window: w2}}}
		}
	}
	conc := func() ratelimit.Limit {
		return ratelimit.Limit{Name: "l", Algorithm: ratelimit.Concurrency, MaxInFlight: 2}
	}
	for _, tc := range []struct {
		name string
		a, b func() ratelimit.Limit
		same bool
	}{
		{"count", base, func() ratelimit.Limit { l := base(); l.Rates[0].Limit = 3; return l }, true},
		{"burst", base, func() ratelimit.Limit { l := base(); l.Burst = 4; return l }, true},
		{"max_in_flight", conc, func() ratelimit.Limit { l := conc(); l.MaxInFlight = 3; return l }, true},
		{"precision equal to the window", counter, func() ratelimit.Limit { l := counter(); l.Precision = time.Minute; return l }, true},
		{"name", base, func() ratelimit.Limit { l := base(); l.Name = "m"; return l }, false},
		{"algorithm", base, func() ratelimit.Limit { l := base(); l.Algorithm = ratelimit.GCRA; return l }, false},
		{"mode", base, func() ratelimit.Limit { l := base(); l.Shadow = true; return l }, false},
		{"mode of concurrency", conc, func() ratelimit.Limit { l := conc(); l.Shadow = true; return l }, false},
		{"scope", base, func() ratelimit.Limit { l := base(); l.Scope = "by=ip"; return l }, false},
		{"window", base, func() ratelimit.Limit { l := base(); l.Rates[0].Window = time.Hour; return l }, false},
		{"a second rate", base, func() ratelimit.Limit {
			l := base()
			l.Burst = 0
			l.Rates = append(l.Rates, ratelimit.Rate{Limit: 100, Window: time.Hour})
			return l
		}, false},
		{"precision", counter, func() ratelimit.Limit { l := counter(); l.Precision = 10 * time.Second; return l }, false},
		{"rates reordered", two(time.Minute, time.Hour), two(time.Hour, time.Minute), true},
		{"quota periods reordered", quota(ratelimit.MonthWindow, 24*time.Hour), quota(24*time.Hour, ratelimit.MonthWindow), true},
		{"one of two windows changed", two(time.Minute, time.Hour), two(time.Minute, 2*time.Hour), false},
		{"counts swapped between the windows", two(time.Minute, time.Hour), func() ratelimit.Limit {
			l := two(time.Minute, time.Hour)()
			l.Rates[0].Limit, l.Rates[1].Limit = l.Rates[1].Limit, l.Rates[0].Limit
			return l
		}, true}, // counts judge the usage; they never named the counters
		{"name that looks like a separator", func() ratelimit.Limit { l := base(); l.Name = "a|b"; return l },
			func() ratelimit.Limit { l := base(); l.Name = "a"; l.Scope = "b|by=client"; return l }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.a(), tc.b()
			if err := a.Finish(); err != nil {
				t.Fatal(err)
			}
			if err := b.Finish(); err != nil {
				t.Fatal(err)
			}
			if (a.ID == b.ID) != tc.same {
				t.Errorf("IDs %q and %q: same = %v, want %v", a.ID, b.ID, a.ID == b.ID, tc.same)
			}
		})
	}
}

// TestFinishSortsRates: Finish puts a limit's rates in canonical order
// (by window, then count), which is the order of its state's windows, of
// Decision.Window and of Usage, whatever order they were listed in.
func TestFinishSortsRates(t *testing.T) {
	want := []ratelimit.Rate{{Limit: 2, Window: time.Minute}, {Limit: 50, Window: time.Hour}, {Limit: 100, Window: 24 * time.Hour}}
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}} {
		l := ratelimit.Limit{Name: "l", Algorithm: ratelimit.SlidingWindowLog}
		for _, i := range order {
			l.Rates = append(l.Rates, want[i])
		}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		for i, r := range l.Rates {
			if p := l.Params(i); r != want[i] || p.Window != int64(want[i].Window/ratelimit.Tick) || p.Limit != want[i].Limit {
				t.Fatalf("listed in order %v: rate %d is %v (params %+v), want %v", order, i, r, p, want[i])
			}
		}
	}
}
