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
	f64s := func(vs ...float64) string {
		var b []byte
		for _, v := range vs {
			b = appendF64(b, v)
		}
		return string(b)
	}
	const now = 1_700_000_000_000_000
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
