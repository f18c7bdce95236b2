package redisstore

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestShortReplySlidingCounter reads sliding_window_counter short replies
// whose decisions are worked out by hand: 10 per second, and the older
// bucket's units leaving the window linearly over the newer one's second.
func TestShortReplySlidingCounter(t *testing.T) {
	lim := func(prec time.Duration) *ratelimit.Limit {
		l := &ratelimit.Limit{Name: "l", Algorithm: ratelimit.SlidingWindowCounter, Precision: prec,
			Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	one, four := lim(0), lim(250*time.Millisecond)
	// now is the start of a second (bucket i of one, an even index) and
	// of a quarter (bucket q of four, q mod 5 = 0).
	const now = 1_700_000_000_000_000
	const i, q = now / 1_000_000, now / 250_000
	for _, tc := range []struct {
		name  string
		l     *ratelimit.Limit
		state []float64 // newest, then the ring of counts
		// the decision's Remaining and Reset
		rem   int64
		reset time.Duration
	}{
		// 3 in now's bucket, 4 in the one before, all of it still in the
		// window: 7 used, 3 left; 4 more fit once the older bucket weighs
		// 3 of its 4 units, a quarter of a second on.
		{"one bucket", one, []float64{i, 3, 4}, 3, 250 * time.Millisecond},
		// Nothing before now's bucket: 9 used, 1 left, and 2 more once
		// the 9 weigh 8, a ninth of a second into the next bucket:
		// 1 s + 111 112 µs (rounded up).
		{"one bucket, a full bucket", one, []float64{i, 9, 0}, 1, time.Second + 111_112*time.Microsecond},
		// The clock stepped back: the newest bucket, i+1 (ring slot 1),
		// holds 2, and bucket i 5; the estimate is taken at the start of
		// bucket i+1: 2 + 5 = 7, 3 left. 4 more fit once bucket i weighs
		// 4 of 5: a fifth of a second into bucket i+1, 1.2 s from now.
		{"one bucket, the clock stepped back", one, []float64{i + 1, 5, 2}, 3, 1200 * time.Millisecond},
		// Nothing left to give back: Reset 0.
		{"one bucket, nothing used", one, []float64{i, 0, 0}, 10, 0},
		// Four quarters: 1 in now's quarter (slot 0), 2 in each of the
		// three before (slots 4, 3, 2), 6 in the one before them (slot 1,
		// the partial one, fully weighted at now): 13 estimated, 0 left.
		// 1 more fits when 1 + 2 + 2 + 2 + 6·w ≤ 9, w ≤ 1/3: two thirds
		// of a quarter on, 166 667 µs rounded up.
		{"four buckets", four, []float64{q, 1, 6, 2, 2, 2}, 0, 166_667 * time.Microsecond},
	} {
		for _, local := range []bool{true, false} {
			res := f64s(tc.state...)
			if !local {
				res = f64s(append([]float64{now}, tc.state...)...)
			}
			hits := []ratelimit.Hit{{Limit: tc.l, Key: "k", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			at := int64(now)
			if !local {
				at = 0 // the reply's instant is the decision's
			}
			allowed, tk, err := parseReply(res, hits, out, false, at, local)
			if err != nil {
				t.Fatalf("%s (local clock %v): %v", tc.name, local, err)
			}
			want := ratelimit.Decision{Allowed: true, Counted: true, Limit: 10, Remaining: tc.rem, Reset: tc.reset}
			if !allowed || tk.at != now || out[0] != want {
				t.Errorf("%s (local clock %v): %v at %d %+v, want at %d %+v", tc.name, local, allowed, tk.at, out[0], int64(now), want)
			}
		}
	}
}

// shortReplies are a short reply of each algorithm that has one, with the
// local clock, and the limit it answers.
func shortReplies(tb testing.TB) []struct {
	name string
	l    *ratelimit.Limit
	res  any
} {
	lim := func(a ratelimit.Algorithm, prec time.Duration) *ratelimit.Limit {
		l := &ratelimit.Limit{Name: "l", Algorithm: a, Precision: prec, Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}}
		if err := l.Finish(); err != nil {
			tb.Fatal(err)
		}
		return l
	}
	const now = 1_700_000_000_000_000
	return []struct {
		name string
		l    *ratelimit.Limit
		res  any
	}{
		{"fixed_window", lim(ratelimit.FixedWindow, 0), any(int64(4))},
		{"gcra", lim(ratelimit.GCRA, 0), f64s(now + 350_000)},
		{"token_bucket", lim(ratelimit.TokenBucket, 0), f64s(3.5, now-20_000)},
		{"sliding_window_counter", lim(ratelimit.SlidingWindowCounter, 0), f64s(now/1_000_000, 3, 4)},
		{"sliding_window_counter/4", lim(ratelimit.SlidingWindowCounter, 250*time.Millisecond), f64s(now/250_000, 1, 6, 2, 2, 2)},
	}
}

// TestShortReplyAllocs: reading a short reply allocates nothing (its state
// stays on the stack: window's Reported methods).
func TestShortReplyAllocs(t *testing.T) {
	out := make([]ratelimit.Decision, 1)
	for _, r := range shortReplies(t) {
		hits := []ratelimit.Hit{{Limit: r.l, Key: "k", Cost: 1}}
		if n := testing.AllocsPerRun(100, func() {
			if _, _, err := parseReply(r.res, hits, out, false, 1_700_000_000_000_000, true); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per short reply, want 0", r.name, n)
		}
	}
}

// BenchmarkShortReply reads one short reply of each algorithm.
func BenchmarkShortReply(b *testing.B) {
	out := make([]ratelimit.Decision, 1)
	for _, r := range shortReplies(b) {
		hits := []ratelimit.Hit{{Limit: r.l, Key: "k", Cost: 1}}
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := parseReply(r.res, hits, out, false, 1_700_000_000_000_000, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestShortReplyBucketEdges reads the fullest states an admitted count
// leaves, worked out by hand (10 per second, burst 10): they are not
// taken for hostile ones. gcra: the TAT a whole tolerance (1 s) ahead,
// nothing left, one more unit in 100 ms; token_bucket: an empty bucket
// filled at now, one token in 100 ms.
func TestShortReplyBucketEdges(t *testing.T) {
	const now = 1_700_000_000_000_000
	for _, tc := range []struct {
		a     ratelimit.Algorithm
		state []float64
	}{
		{ratelimit.GCRA, []float64{now + 1_000_000}},
		{ratelimit.TokenBucket, []float64{0, now}},
	} {
		l := &ratelimit.Limit{Name: "l", Algorithm: tc.a, Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, v := range tc.state {
			b = appendF64(b, v)
		}
		out := make([]ratelimit.Decision, 1)
		if _, _, err := parseReply(string(b), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out, false, now, true); err != nil {
			t.Fatalf("%v: %v", tc.a, err)
		}
		want := ratelimit.Decision{Allowed: true, Counted: true, Limit: 10, Remaining: 0, Reset: 100 * time.Millisecond}
		if out[0] != want {
			t.Errorf("%v: %+v, want %+v", tc.a, out[0], want)
		}
	}
}

// f64s packs vs as a reply does: little-endian doubles in one string.
func f64s(vs ...float64) string {
	var b []byte
	for _, v := range vs {
		b = appendF64(b, v)
	}
	return string(b)
}

// BenchmarkFullReply reads the full reply of two hits on a two-window
// limit: allowed, the instant, then per hit its counted, never and
// old-exists flags and per window ok, retry, remaining and reset.
func BenchmarkFullReply(b *testing.B) {
	l := &ratelimit.Limit{Name: "l", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}, {Limit: 100, Window: time.Minute}}}
	if err := l.Finish(); err != nil {
		b.Fatal(err)
	}
	const now = 1_700_000_000_000_000
	hits := []ratelimit.Hit{{Limit: l, Key: "a", Cost: 1}, {Limit: l, Key: "b", Cost: 1}}
	v := []float64{1, now}
	for range hits {
		v = append(v, 1, 0, 1, 1, 0, 7, 400_000, 1, 0, 90, 40_000_000)
	}
	res := f64s(v...)
	out := make([]ratelimit.Decision, len(hits))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseReply(res, hits, out, false, now, true); err != nil {
			b.Fatal(err)
		}
	}
}
