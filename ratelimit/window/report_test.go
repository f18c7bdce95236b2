package window

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestReportCheckedEqualsReport: after Check (and Take when allowed),
// ReportChecked with the hit's cost reports exactly what Report does, for
// every algorithm with one and with two windows, over pseudo-random
// arrivals and costs; denials where it reuses Check's RetryAfter (cost =
// Remaining+1) are among them.
func TestReportCheckedEqualsReport(t *testing.T) {
	const W = 1000 * ratelimit.Tick
	type algo struct {
		name  string
		a     ratelimit.Algorithm
		burst int64
		prec  time.Duration
	}
	reused := 0
	for _, al := range []algo{
		{"fixed_window", ratelimit.FixedWindow, 0, 0},
		{"sliding_window_log", ratelimit.SlidingWindowLog, 0, 0},
		{"sliding_window_counter", ratelimit.SlidingWindowCounter, 0, 0},
		{"sliding_window_counter/precision", ratelimit.SlidingWindowCounter, 0, 100 * ratelimit.Tick},
		{"token_bucket", ratelimit.TokenBucket, 3, 0},
		{"gcra", ratelimit.GCRA, 3, 0},
	} {
		for _, rates := range [][]ratelimit.Rate{
			{{Limit: 5, Window: W}},
			{{Limit: 5, Window: W}, {Limit: 12, Window: 5 * W}},
		} {
			burst := al.burst
			if len(rates) > 1 {
				burst = 0 // a burst goes with one rate only
			}
			l := &ratelimit.Limit{Name: "r", Algorithm: al.a, Rates: rates, Burst: burst, Precision: al.prec}
			if err := l.Finish(); err != nil {
				t.Fatalf("%s: %v", al.name, err)
			}
			switch al.a {
			case ratelimit.FixedWindow:
				reused += reportSequence[FixedWindowState](t, al.name, l, func(s FixedWindowState) FixedWindowState { return s })
			case ratelimit.SlidingWindowLog:
				reused += reportSequence[LogState](t, al.name, l, cloneLog)
			case ratelimit.SlidingWindowCounter:
				reused += reportSequence[SlidingCounterState](t, al.name, l, func(s SlidingCounterState) SlidingCounterState { return s })
			case ratelimit.TokenBucket:
				reused += reportSequence[TokenBucketState](t, al.name, l, func(s TokenBucketState) TokenBucketState { return s })
			case ratelimit.GCRA:
				reused += reportSequence[GCRAState](t, al.name, l, func(s GCRAState) GCRAState { return s })
			}
		}
	}
	if reused < 100 {
		t.Errorf("only %d denials reused Check's RetryAfter; the test does not exercise ReportChecked", reused)
	}
}

// reportSequence runs 2,000 pseudo-random hits through l's states and
// returns how many denials met ReportChecked's reuse condition.
func reportSequence[S any, P StatePtr[S]](t *testing.T, name string, l *ratelimit.Limit, clone func(S) S) int {
	t.Helper()
	states := make([]S, l.Windows())
	now := int64(1_700_000_000_000_000) / int64(ratelimit.Tick/time.Microsecond)
	Init[S, P](l, states, now)
	x := uint64(0x9e3779b97f4a7c15)
	reused := 0
	for i := range 2000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		now += int64(x % 150) // 0–149 ticks: bursts and refills
		cost := int64(1)
		if x>>20%4 == 0 {
			cost = int64(x>>24%4) + 1
		}
		var d ratelimit.Decision
		Check[S, P](l, states, now, cost, &d)
		if d.Allowed {
			Take[S, P](l, states, now, cost)
		}
		copies := make([]S, len(states))
		for j := range states {
			copies[j] = clone(states[j])
		}
		want, got := d, d
		Report[S, P](l, copies, now, &want)
		ReportChecked[S, P](l, states, now, cost, &got)
		if got != want {
			t.Fatalf("%s, %d windows, hit %d (cost %d): ReportChecked %+v, Report %+v", name, len(states), i, cost, got, want)
		}
		if !d.Allowed && !d.Never && got.Remaining+1 == cost {
			reused++
		}
	}
	return reused
}
