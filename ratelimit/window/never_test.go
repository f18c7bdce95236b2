package window

import (
	"math"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// noHang runs f and fails the test if it has not returned well before the
// test's deadline (or within two minutes without one): a search that does
// not end would otherwise hold the test until the whole run times out.
// It measures nothing; the guard is only there to turn a hang into a
// failure with a name.
func noHang(t *testing.T, name string, f func()) {
	t.Helper()
	wait := 2 * time.Minute
	if dl, ok := t.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("%s: still searching after %s (the search for the next admitting instant has no bound)", name, wait)
	}
}

// TestNeverAdmittingStateReturns: a bucket or GCRA state that admits
// nothing within ratelimit.MaxWait — a corrupted one (not a number,
// infinite, far below empty, far ahead) or a valid one whose refill takes
// longer (a burst of 2^53 at one unit per 366 days) — is denied at once
// with RetryAfter and Reset MaxWait, not searched for forever; and one
// that admits just within MaxWait still gets its exact wait.
func TestNeverAdmittingStateReturns(t *testing.T) {
	now := int64(1_702_080_000_000_000)
	maxW := int64(ratelimit.MaxWait / ratelimit.Tick)
	year := ratelimit.Rate{Limit: 1, Window: ratelimit.MaxWindow}
	minute := ratelimit.Rate{Limit: 10, Window: time.Minute}
	tbState := func(tokens float64, ts int64) *TokenBucketState { return &TokenBucketState{Tokens: tokens, TS: ts} }
	cases := []struct {
		name  string
		alg   ratelimit.Algorithm
		rate  ratelimit.Rate
		burst int64
		tb    *TokenBucketState
		gcra  *GCRAState
		cost  int64
		never bool // no wait up to MaxWait admits cost
	}{
		{name: "token bucket, tokens NaN", alg: ratelimit.TokenBucket, rate: minute, tb: tbState(math.NaN(), now), cost: 1, never: true},
		{name: "token bucket, tokens -Inf", alg: ratelimit.TokenBucket, rate: minute, tb: tbState(math.Inf(-1), now), cost: 1, never: true},
		{name: "token bucket, tokens -1e300", alg: ratelimit.TokenBucket, rate: minute, tb: tbState(-1e300, now), cost: 1, never: true},
		{name: "token bucket, instant 2^60 ticks ahead", alg: ratelimit.TokenBucket, rate: minute, tb: tbState(0, now+1<<60), cost: 1, never: true},
		{name: "token bucket, burst 2^53 refilled at 1/366d", alg: ratelimit.TokenBucket, rate: year, burst: ratelimit.MaxLimit,
			tb: tbState(0, now), cost: ratelimit.MaxLimit, never: true},
		{name: "token bucket, burst 99 refilled at 1/366d (within MaxWait)", alg: ratelimit.TokenBucket, rate: year, burst: 99,
			tb: tbState(0, now), cost: 99},
		{name: "gcra, TAT NaN", alg: ratelimit.GCRA, rate: minute, gcra: &GCRAState{TAT: math.NaN()}, cost: 1, never: true},
		{name: "gcra, TAT +Inf", alg: ratelimit.GCRA, rate: minute, gcra: &GCRAState{TAT: math.Inf(1)}, cost: 1, never: true},
		{name: "gcra, TAT 1e300", alg: ratelimit.GCRA, rate: minute, gcra: &GCRAState{TAT: 1e300}, cost: 1, never: true},
		{name: "gcra, TAT 2^61 ticks ahead", alg: ratelimit.GCRA, rate: minute, gcra: &GCRAState{TAT: float64(now + 1<<61)}, cost: 1, never: true},
		{name: "gcra, burst 2^53 at 1/366d, empty", alg: ratelimit.GCRA, rate: year, burst: ratelimit.MaxLimit,
			gcra: &GCRAState{TAT: float64(now) + float64(ratelimit.MaxLimit)*float64(maxW/100)}, cost: ratelimit.MaxLimit, never: true},
		{name: "gcra, burst 99 at 1/366d, empty (within MaxWait)", alg: ratelimit.GCRA, rate: year, burst: 99,
			gcra: &GCRAState{TAT: float64(now) + 99*float64(maxW/100)}, cost: 99},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &ratelimit.Limit{Name: "x", Algorithm: tc.alg, Rates: []ratelimit.Rate{tc.rate}, Burst: tc.burst}
			if err := l.Finish(); err != nil {
				t.Fatal(err)
			}
			p := l.Params(0)
			var w State = tc.tb
			if tc.gcra != nil {
				w = tc.gcra
			}
			var d ratelimit.Decision
			var usage [1]ratelimit.WindowUsage
			var admitsAtMax bool
			noHang(t, "Check/Report/Usage", func() {
				admitsAtMax, _ = w.allow(&p, now+maxW, tc.cost)
				if tc.tb != nil {
					s := []TokenBucketState{*tc.tb}
					Check(l, s, now, tc.cost, &d)
					ReportChecked(l, s, now, tc.cost, &d)
					Usage(l, s, now, usage[:])
				} else {
					s := []GCRAState{*tc.gcra}
					Check(l, s, now, tc.cost, &d)
					ReportChecked(l, s, now, tc.cost, &d)
					Usage(l, s, now, usage[:])
				}
			})
			if admitsAtMax == tc.never {
				t.Fatalf("the state admits cost %d at now+MaxWait: %v; the case says never: %v", tc.cost, admitsAtMax, tc.never)
			}
			if d.Allowed || d.Never {
				t.Fatalf("decision %+v, want a denial that a wait could end", d)
			}
			if d.RetryAfter <= 0 || d.RetryAfter > ratelimit.MaxWait || d.Reset > d.RetryAfter || usage[0].Reset > ratelimit.MaxWait {
				t.Fatalf("decision %+v, usage %+v: waits must lie in 1 tick..MaxWait (%s), Reset ≤ RetryAfter", d, usage[0], ratelimit.MaxWait)
			}
			want := oracleFirst(1, func(x int64) bool { ok, _ := w.allow(&p, now+x, tc.cost); return ok })
			if got := int64(d.RetryAfter / ratelimit.Tick); got != want {
				t.Fatalf("RetryAfter %d ticks, oracle %d (MaxWait %d)", got, want, maxW)
			}
			if tc.never && d.RetryAfter != ratelimit.MaxWait {
				t.Fatalf("RetryAfter %s, want MaxWait %s for a state that never admits within it", d.RetryAfter, ratelimit.MaxWait)
			}
		})
	}
}
