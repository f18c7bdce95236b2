package redisstore

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestShortReplyHostile feeds parseReply one-hit replies that no decide
// code sends (a corrupt or foreign server, a reply meant for another
// limit): each is an error, never a panic or a decision made up from it.
func TestShortReplyHostile(t *testing.T) {
	lim := func(a ratelimit.Algorithm, rates ...ratelimit.Rate) *ratelimit.Limit {
		l := &ratelimit.Limit{Name: "l", Algorithm: a, Rates: rates}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	r := ratelimit.Rate{Limit: 10, Window: time.Second}
	fw, gc := lim(ratelimit.FixedWindow, r), lim(ratelimit.GCRA, r)
	two := lim(ratelimit.FixedWindow, r, ratelimit.Rate{Limit: 100, Window: time.Minute})
	swc := lim(ratelimit.SlidingWindowCounter, r)
	tb := lim(ratelimit.TokenBucket, r)
	swc2 := lim(ratelimit.SlidingWindowCounter, r, ratelimit.Rate{Limit: 100, Window: time.Minute})
	const now = 1_700_000_000_000_000
	const newest = now / 1_000_000 // swc's bucket at now (one bucket of 1 s)
	for _, tc := range []struct {
		name  string
		l     *ratelimit.Limit
		res   any
		local bool
	}{
		{"integer with the store clock", fw, int64(3), false},
		{"integer for gcra", gc, int64(3), true},
		{"integer for a two-window limit", two, int64(3), true},
		{"integer for another algorithm", swc, int64(3), true},
		{"negative count", fw, int64(-1), true},
		{"8 bytes for a fixed window", fw, f64s(3), true},
		{"NaN TAT", gc, f64s(math.NaN()), true},
		{"infinite TAT", gc, f64s(math.Inf(1)), true},
		{"16 bytes, NaN instant", fw, f64s(math.NaN(), 3), false},
		{"16 bytes, negative instant", gc, f64s(-5, now), false},
		{"16 bytes, instant past 2^53", gc, f64s(1e300, now), false},
		{"16 bytes, fractional instant", fw, f64s(now+0.5, 3), false},
		{"16 bytes, fractional count", fw, f64s(now, 2.5), false},
		{"16 bytes, count past 2^53", fw, f64s(now, 1e20), false},
		{"16 bytes, NaN count", fw, f64s(now, math.NaN()), false},
		{"16 bytes for another algorithm", swc, f64s(now, 3), false},
		{"17 bytes", fw, f64s(now, 3) + "x", false},
		{"8 bytes for a token bucket", tb, f64s(3), true},
		{"16 bytes for a fixed window", fw, f64s(3, now), true},
		{"token bucket, NaN tokens", tb, f64s(math.NaN(), now), true},
		{"token bucket, infinite tokens", tb, f64s(math.Inf(-1), now), true},
		{"token bucket, fractional instant", tb, f64s(3, now+0.25), true},
		{"token bucket, negative instant", tb, f64s(now, 3, -1), false},
		{"token bucket, instant past 2^53", tb, f64s(3, 1e17), true},
		{"24 bytes for gcra", gc, f64s(now, now, now), false},
		// states no admitted count leaves, whose Reset searches would
		// not end
		{"gcra, TAT far ahead", gc, f64s(1e300), true},
		{"gcra, TAT past the tolerance", gc, f64s(now + 1_000_000 + 10), true},
		{"token bucket, far below empty", tb, f64s(-1.7e289, now), true},
		{"token bucket, below empty", tb, f64s(-0.5, now), true},
		{"token bucket, above the burst", tb, f64s(10.5, now), true},
		{"sliding counter, 2 doubles for one bucket", swc, f64s(newest, 1), true},
		{"sliding counter, 4 doubles for one bucket", swc, f64s(newest, 1, 1, 1), true},
		{"sliding counter, 3 doubles with the store clock", swc, f64s(newest, 1, 1), false},
		{"sliding counter, 8 doubles", swc, f64s(newest, 1, 1, 1, 1, 1, 1, 1), true},
		{"sliding counter, 20 bytes", swc, f64s(newest, 1) + "abcd", true},
		{"sliding counter, NaN count", swc, f64s(newest, math.NaN(), 1), true},
		{"sliding counter, infinite count", swc, f64s(newest, 1, math.Inf(1)), true},
		{"sliding counter, negative count", swc, f64s(newest, -1, 1), true},
		{"sliding counter, fractional count", swc, f64s(newest, 1, 0.5), true},
		{"sliding counter, count past 2^53", swc, f64s(newest, 1e17, 1), true},
		{"sliding counter, count just past 2^53", swc, f64s(newest, 1<<53+2, 1), true},
		{"sliding counter, NaN newest", swc, f64s(math.NaN(), 1, 1), true},
		{"sliding counter, negative newest", swc, f64s(-1, 1, 1), true},
		{"sliding counter, fractional newest", swc, f64s(newest+0.5, 1, 1), true},
		{"sliding counter, newest before now's bucket", swc, f64s(newest-1, 1, 1), true},
		{"sliding counter, newest past 2^53 ticks", swc, f64s(1e10, 1, 1), true},
		{"sliding counter, NaN instant", swc, f64s(math.NaN(), newest, 1, 1), false},
		{"sliding counter, newest before the instant's bucket", swc, f64s(now+2_000_000, newest, 1, 1), false},
		{"sliding counter, a two-window limit", swc2, f64s(newest, 1, 1), true},
		{"sliding counter, a two-window limit, store clock", swc2, f64s(now, newest, 1, 1), false},
		{"an empty string", fw, "", true},
		// a full reply (9 doubles) whose never field names no window
		{"full reply, never past the windows", fw, f64s(0, now, 0, 2, 0, 0, 0, 0, 0), true},
		{"full reply, never far past the windows", swc, f64s(0, now, 0, 1060912, 0, 0, 0, 0, 0), true},
		{"a long garbage string", fw, strings.Repeat("\xff", 71), true},
		{"an array", fw, []any{int64(1)}, true},
		{"nil", fw, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := []ratelimit.Hit{{Limit: tc.l, Key: "k", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			if _, _, err := parseReply(tc.res, hits, out, false, now, tc.local); err == nil {
				t.Fatalf("reply %q accepted: %+v", tc.res, out[0])
			}
		})
	}
}

// FuzzShortReply feeds parseReply arbitrary one-hit replies for every
// algorithm with a short reply (sliding counters of 1 and 4 buckets), on
// both clocks: none may panic or hang, and a short one (below 72 bytes)
// taken as a decision reports a Remaining within the capacity and no
// negative Reset. (The full reply's values are not checked here.)
func FuzzShortReply(f *testing.F) {
	var limits []*ratelimit.Limit
	for _, l := range []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow},
		{Algorithm: ratelimit.GCRA, Burst: 3},
		{Algorithm: ratelimit.TokenBucket, Burst: 3},
		{Algorithm: ratelimit.SlidingWindowCounter},
		{Algorithm: ratelimit.SlidingWindowCounter, Precision: 250 * time.Millisecond},
	} {
		l.Name = "l"
		l.Rates = []ratelimit.Rate{{Limit: 10, Window: time.Second}}
		if err := l.Finish(); err != nil {
			f.Fatal(err)
		}
		limits = append(limits, &l)
	}
	const now = 1_700_000_000_000_000
	for _, vs := range [][]float64{
		{now / 1_000_000, 3, 4}, {now, now / 1_000_000, 3, 4}, {now / 250_000, 1, 6, 2, 2, 2},
		{now + 350_000}, {3.5, now - 20_000}, {now, 3.5, now}, {4},
	} {
		var b []byte
		for _, v := range vs {
			b = appendF64(b, v)
		}
		for i := range limits {
			f.Add(uint8(i), true, b)
			f.Add(uint8(i), false, b)
		}
	}
	f.Fuzz(func(t *testing.T, li uint8, local bool, b []byte) {
		l := limits[int(li)%len(limits)]
		hits := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}
		out := make([]ratelimit.Decision, 1)
		var res any = string(b)
		if len(b) == 8 && l.Algorithm == ratelimit.FixedWindow && local {
			res = int64(f64At(string(b), 0)) // an integer reply
		}
		if _, _, err := parseReply(res, hits, out, false, now, local); err != nil || len(b) >= fullOneHit {
			return
		}
		d := out[0]
		if d.Remaining < 0 || d.Remaining > d.Limit || d.Reset < 0 || d.RetryAfter < 0 {
			t.Fatalf("reply %x (local clock %v) for %v: %+v", b, local, l.Algorithm, d)
		}
	})
}

// TestFixedReplyHostile feeds fixedReply counts replies that no decide
// code sends for two fixed-window hits (a corrupt or foreign server, a
// reply meant for other hits): each is an error, never a panic or a
// decision made up from it; a well-formed one decides.
func TestFixedReplyHostile(t *testing.T) {
	lim := func(a ratelimit.Algorithm, rates ...ratelimit.Rate) *ratelimit.Limit {
		l := &ratelimit.Limit{Name: "l", Algorithm: a, Rates: rates}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	r := ratelimit.Rate{Limit: 10, Window: time.Second}
	fw := lim(ratelimit.FixedWindow, r)
	two := lim(ratelimit.FixedWindow, r, ratelimit.Rate{Limit: 100, Window: time.Minute})
	swc := lim(ratelimit.SlidingWindowCounter, r)
	const now = 1_700_000_000_000_000
	hits := func(ls ...*ratelimit.Limit) []ratelimit.Hit {
		var hs []ratelimit.Hit
		for _, l := range ls {
			hs = append(hs, ratelimit.Hit{Limit: l, Key: "k", Cost: 1})
		}
		return hs
	}
	for _, tc := range []struct {
		name  string
		hits  []ratelimit.Hit
		res   string
		local bool
	}{
		{"empty", hits(fw, fw), "", true},
		{"empty, store clock", hits(fw, fw), "", false},
		{"one count for two hits", hits(fw, fw), f64s(3), true},
		{"three counts for two hits", hits(fw, fw), f64s(3, 3, 3), true},
		{"two counts without the instant", hits(fw, fw), f64s(3, 3), false},
		{"12 bytes", hits(fw, fw), f64s(3) + "abcd", true},
		{"NaN count", hits(fw, fw), f64s(3, math.NaN()), true},
		{"infinite count", hits(fw, fw), f64s(math.Inf(1), 3), true},
		{"negative count", hits(fw, fw), f64s(3, -1), true},
		{"fractional count", hits(fw, fw), f64s(2.5, 3), true},
		{"count past 2^53", hits(fw, fw), f64s(3, 1e20), true},
		{"NaN instant", hits(fw, fw), f64s(math.NaN(), 3, 3), false},
		{"negative instant", hits(fw, fw), f64s(-1, 3, 3), false},
		{"fractional instant", hits(fw, fw), f64s(now+0.5, 3, 3), false},
		{"instant past 2^53", hits(fw, fw), f64s(1e300, 3, 3), false},
		{"a two-window limit", hits(fw, two), f64s(3, 3), true},
		{"another algorithm", hits(swc, fw), f64s(3, 3), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]ratelimit.Decision, len(tc.hits))
			if _, err := fixedReply(tc.res, tc.hits, out, now, tc.local); err == nil {
				t.Fatalf("fixedReply(%q) = %+v, want an error", tc.res, out)
			}
		})
	}
	out := make([]ratelimit.Decision, 2)
	at, err := fixedReply(f64s(now+7, 4, 10), hits(fw, fw), out, 0, false)
	want := ratelimit.Decision{Allowed: true, Counted: true, Limit: 10, Remaining: 6, Reset: time.Second - 7*time.Microsecond}
	if err != nil || at != now+7 || out[0] != want || out[1].Remaining != 0 {
		t.Fatalf("fixedReply: %d %+v %v, want %d %+v and none remaining", at, out, err, now+7, want)
	}
}
