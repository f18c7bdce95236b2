package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestFixedHitsHostile drives the fixed-window path and memstore through
// scripted calls an adversary would pick and requires identical
// decisions: instants on a window's boundary (its first and last tick),
// the clock stepping back across a boundary after counting in the later
// window and forward again, costs of exactly the limit, one past it and
// ratelimit.MaxLimit, a key counted by a one-hit call and by a call of
// five hits (the general path) between calls of the fixed-window path,
// and a key named twice in one call (the general path's shared state).
// On a limit of 2^53 a count and a cost summed in doubles rounded down to
// the limit and were admitted past it (a count of 2^53 − 1 plus 2, or
// 2^53 plus 1) on every path of the decide code; the scripts compare the
// cost with the limit less the count, which is exact.
func TestFixedHitsHostile(t *testing.T) {
	ctx := context.Background()
	for _, script := range []bool{false, true} {
		clock := ratelimit.ClockLocal
		rs, _ := fixedStore(t, clock, script)
		ms := memstore.New(memstore.Options{})
		a := finished(t, ratelimit.Limit{Name: "ha", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(3, time.Second)}})
		b := finished(t, ratelimit.Limit{Name: "hb", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(5, 10*time.Second)}})
		big := finished(t, ratelimit.Limit{Name: "hbig", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(ratelimit.MaxLimit, time.Hour)}})
		sh := finished(t, ratelimit.Limit{Name: "hsh", Algorithm: ratelimit.FixedWindow, Shadow: true, Rates: []ratelimit.Rate{rate(1, time.Second)}})
		base := time.Date(2031, 1, 1, 0, 0, 10, 0, time.UTC) // a 10 s window's start
		hit := func(l *ratelimit.Limit, k string, c int64) ratelimit.Hit {
			return ratelimit.Hit{Limit: l, Key: k, Cost: c}
		}
		tick := time.Microsecond
		steps := []struct {
			at   time.Duration
			hits []ratelimit.Hit
		}{
			{0, []ratelimit.Hit{hit(a, "x", 1), hit(b, "y", 1)}},
			{time.Second - tick, []ratelimit.Hit{hit(a, "x", 2), hit(b, "y", 1)}},                                               // a's last tick: full
			{time.Second - tick, []ratelimit.Hit{hit(a, "x", 1), hit(b, "y", 1)}},                                               // denied by a, y not counted
			{time.Second, []ratelimit.Hit{hit(a, "x", 3), hit(b, "y", 2)}},                                                      // a's next window: exactly the limit
			{time.Second, []ratelimit.Hit{hit(a, "x2", 4), hit(b, "y", 1)}},                                                     // a cost past a's capacity
			{time.Second - tick, []ratelimit.Hit{hit(a, "x", 1), hit(b, "y", 1)}},                                               // the clock steps back: x holds the later window
			{500 * time.Millisecond, []ratelimit.Hit{hit(a, "x3", 1), hit(b, "y", 1)}},                                          // further back
			{10*time.Second - tick, []ratelimit.Hit{hit(a, "x", 1), hit(b, "y", 1)}},                                            // b's last tick
			{10 * time.Second, []ratelimit.Hit{hit(a, "x", 1), hit(b, "y", 5)}},                                                 // b's next window
			{10 * time.Second, []ratelimit.Hit{hit(a, "x", 1)}},                                                                 // one-hit path on x
			{10 * time.Second, []ratelimit.Hit{hit(a, "x", 1), hit(b, "y", 1)}},                                                 // fixed path after it
			{10 * time.Second, []ratelimit.Hit{hit(a, "x", 1), hit(a, "x", 1)}},                                                 // same key twice
			{11 * time.Second, []ratelimit.Hit{hit(a, "x", 1), hit(a, "x", 1), hit(a, "z", 1), hit(b, "w", 1), hit(b, "v", 1)}}, // general
			{11 * time.Second, []ratelimit.Hit{hit(a, "x", 1), hit(b, "w", 1)}},
			{11 * time.Second, []ratelimit.Hit{hit(sh, "s", 1), hit(a, "z", 1)}},
			{11 * time.Second, []ratelimit.Hit{hit(sh, "s", 1), hit(a, "z", 1)}}, // the shadow hit over its limit
			{11 * time.Second, []ratelimit.Hit{hit(big, "m", ratelimit.MaxLimit), hit(a, "q", 1)}},
			{11 * time.Second, []ratelimit.Hit{hit(big, "m", 1), hit(a, "q", 1)}},
			{12 * time.Second, []ratelimit.Hit{hit(big, "n", ratelimit.MaxLimit-1), hit(a, "q", 1)}},
			{12 * time.Second, []ratelimit.Hit{hit(big, "n", 2), hit(a, "q", 1)}}, // one past 2^53 in all
			{12 * time.Second, []ratelimit.Hit{hit(big, "n", 1)}},                 // the one-hit path at 2^53
			{13 * time.Second, []ratelimit.Hit{hit(big, "o", ratelimit.MaxLimit-1)}},
			{13 * time.Second, []ratelimit.Hit{hit(big, "o", 2)}},
			{13 * time.Second, []ratelimit.Hit{hit(big, "p", ratelimit.MaxLimit-1), hit(a, "r", 1), hit(a, "r2", 1), hit(a, "r3", 1), hit(a, "r4", 1)}},
			{13 * time.Second, []ratelimit.Hit{hit(big, "p", 2), hit(a, "r", 1), hit(a, "r2", 1), hit(a, "r3", 1), hit(a, "r4", 1)}}, // the general path
		}
		got, want := make([]ratelimit.Decision, 5), make([]ratelimit.Decision, 5)
		for i, s := range steps {
			now := base.Add(s.at)
			wa, ga := decideBoth(t, ctx, ms, rs, now, s.hits, want, got, i)
			if ga != wa || fmt.Sprint(got[:len(s.hits)]) != fmt.Sprint(want[:len(s.hits)]) {
				t.Errorf("script=%v step %d at +%v: %v: got %v %+v, memstore %v %+v", script, i, s.at, hitNames(s.hits), ga, got[:len(s.hits)], wa, want[:len(s.hits)])
			}
		}
	}
}
