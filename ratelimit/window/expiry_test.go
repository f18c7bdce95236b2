package window

import (
	"math"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// expiryAfterOneHit initialises a state of l at t0, counts one unit at
// t0+250ms, and returns Expiry, the Usage at that instant and the
// ParamsOf the window.
func expiryAfterOneHit[S any, P StatePtr[S]](t *testing.T, l *ratelimit.Limit, t0 int64) (int64, ratelimit.WindowUsage) {
	t.Helper()
	states := make([]S, 1)
	Init[S, P](l, states, t0)
	now := t0 + 250_000
	p := l.ParamsOf(0)
	if ok, _ := P(&states[0]).allow(p, now, 1); !ok {
		t.Fatalf("%s: the first unit was denied", l.Algorithm)
	}
	P(&states[0]).take(p, now, 1)
	out := make([]ratelimit.WindowUsage, 1)
	Usage[S, P](l, states, now, out)
	return Expiry[S, P](l, states), out[0]
}

// TestExpiryAndUsage: after one unit at t0+250 ms of a 10/s limit (t0 on a
// second boundary), the instant each state becomes fresh again, computed by
// hand from each algorithm's definition, and the usage then.
func TestExpiryAndUsage(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000) // a whole second, in ticks (µs)
	mk := func(a ratelimit.Algorithm) *ratelimit.Limit {
		l := &ratelimit.Limit{Name: "x", Algorithm: a, Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}}
		if a == ratelimit.Concurrency {
			l.Rates, l.MaxInFlight = nil, 10
		}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, tc := range []struct {
		a    ratelimit.Algorithm
		run  func(*ratelimit.Limit) (int64, ratelimit.WindowUsage)
		want int64
	}{
		// The aligned window [t0, t0+1s) ends.
		{ratelimit.FixedWindow, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) {
			return expiryAfterOneHit[FixedWindowState](t, l, t0)
		}, t0 + 1_000_000},
		// The box ends a window after the counted unit.
		{ratelimit.FixedWindowElastic, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) {
			return expiryAfterOneHit[ElasticState](t, l, t0)
		}, t0 + 1_250_000},
		// The unit leaves the log a window after it was logged.
		{ratelimit.SlidingWindowLog, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) { return expiryAfterOneHit[LogState](t, l, t0) }, t0 + 1_250_000},
		// Bucket t0 (one per window) stops weighing when bucket t0+2s begins.
		{ratelimit.SlidingWindowCounter, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) {
			return expiryAfterOneHit[SlidingCounterState](t, l, t0)
		}, t0 + 2_000_000},
		// One token back at 10/s takes 100 ms, plus the one tick.
		{ratelimit.TokenBucket, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) {
			return expiryAfterOneHit[TokenBucketState](t, l, t0)
		}, t0 + 250_000 + 100_000 + 1},
		// tat = now + T, T = 100 ms.
		{ratelimit.GCRA, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) { return expiryAfterOneHit[GCRAState](t, l, t0) }, t0 + 350_000},
		// A unit in flight never expires.
		{ratelimit.Concurrency, func(l *ratelimit.Limit) (int64, ratelimit.WindowUsage) {
			return expiryAfterOneHit[ConcurrencyState](t, l, t0)
		}, math.MaxInt64},
	} {
		l := mk(tc.a)
		exp, u := tc.run(l)
		if exp != tc.want {
			t.Errorf("%s: Expiry %d (t0%+d), want t0%+d", tc.a, exp, exp-t0, tc.want-t0)
		}
		if u.Used != 1 || u.Remaining != 9 {
			t.Errorf("%s: usage %+v, want 1 used, 9 remaining", tc.a, u)
		}
		if tc.a == ratelimit.FixedWindow && u.Reset != 750*time.Millisecond {
			t.Errorf("fixed_window: Reset %s, want 750ms (the window's end)", u.Reset)
		}
		if tc.a != ratelimit.Concurrency && u.Rate != (ratelimit.Rate{Limit: 10, Window: time.Second}) {
			t.Errorf("%s: usage rate %+v", tc.a, u.Rate)
		}
	}
	// A released slot and an empty log are fresh at once.
	var c ConcurrencyState
	p := mk(ratelimit.Concurrency).ParamsOf(0)
	c.take(p, t0, 2)
	c.Release(5)
	if c.InFlight != 0 || c.Expiry(p) != math.MinInt64 || c.remaining(p, t0) != 10 {
		t.Errorf("after releasing more than held: %+v, Expiry %d, Remaining %d; want 0 in flight, fresh, 10", c, c.Expiry(p), c.remaining(p, t0))
	}
	var lg LogState
	if lg.Expiry(mk(ratelimit.SlidingWindowLog).ParamsOf(0)) != math.MinInt64 {
		t.Errorf("an empty log is not fresh")
	}
}
