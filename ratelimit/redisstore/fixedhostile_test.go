package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestFixedHitsHostile drives the fixed-window path and memstore through
// scripted calls an adversary would pick and requires identical
// decisions: instants on a window's boundary (its first and last tick),
// the clock stepping back across a boundary after counting in the later
// window and forward again, costs of exactly the limit, one past it and
// ratelimit.MaxLimit, a key counted by a one-hit call and by a call of
// five hits (the general path) between calls of the fixed-window path,
// a key named twice in one call (the general path's shared state), and a
// peek (an Envoy hits_addend of 0) beside counted hits.
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
		peek := func(l *ratelimit.Limit, k string) ratelimit.Hit {
			return ratelimit.Hit{Limit: l, Key: k, Cost: 1, Mode: ratelimit.HitPeek}
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
			{14 * time.Second, []ratelimit.Hit{peek(a, "pk"), hit(a, "pk", 3), hit(b, "y2", 1)}},                                     // a peek (hits_addend 0) before a count of one key
			{14 * time.Second, []ratelimit.Hit{peek(a, "pk"), hit(b, "y2", 1)}},                                                      // the peek of a full window
			{14 * time.Second, []ratelimit.Hit{hit(b, "y2", 1), peek(a, "pk2")}},
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

// TestFixedHitsClusterParity: on Redis Cluster a call's hits are decided
// slot by slot (a later slot's denial refunds the earlier ones and only
// checks the rest), so hits sharing a hash tag checked after a denial
// take the fixed-window path in check mode. The decisions must still be
// memstore's, with the clock stepping back now and then.
func TestFixedHitsClusterParity(t *testing.T) {
	ctx := context.Background()
	c := newClusterClient(t, sharedCluster().Addrs())
	forms := &replyForms{}
	c.AddHook(forms)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1, TTLMargin: time.Hour})
	if err := rs.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	ms := memstore.New(memstore.Options{})
	fixed, _ := fixedLimits(t)
	keys := []string{"{fx}k0", "{fx}k1", "{fx}k2", "{fy}k0", "{fy}k1", "p", "q"}
	rng := rand.New(rand.NewPCG(21, 22))
	now := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	got, want := make([]ratelimit.Decision, 4), make([]ratelimit.Decision, 4)
	for step := range 800 {
		switch r := rng.IntN(100); {
		case r < 3:
			now = now.Add(-time.Duration(rng.Int64N(300_000)) * time.Microsecond)
		case r < 85:
			now = now.Add(time.Duration(rng.Int64N(40_000)) * time.Microsecond)
		default:
			now = now.Add(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
		}
		hits := make([]ratelimit.Hit, 2+rng.IntN(3))
		for i := range hits {
			l := fixed[rng.IntN(len(fixed))]
			cost := int64(1)
			if rng.IntN(5) == 0 {
				cost = 1 + rng.Int64N(2*l.Params(0).Capacity)
			}
			hits[i] = ratelimit.Hit{Limit: l, Key: keys[rng.IntN(len(keys))], Cost: cost}
		}
		wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
		if ga != wa || fmt.Sprint(got[:len(hits)]) != fmt.Sprint(want[:len(hits)]) {
			t.Fatalf("step %d at %s: %v: got %v %+v, memstore %v %+v",
				step, now.Format(time.RFC3339Nano), hitNames(hits), ga, got[:len(hits)], wa, want[:len(hits)])
		}
	}
	// Decide mode on a cluster wants the old values (for a refund) and
	// takes the general path; the slots checked after a denial take the
	// fixed-window path in check mode, answered with the full reply of
	// 2 + 7H doubles (two hits: 128 bytes).
	seen := map[string]int{}
	for _, f := range forms.forms {
		seen[f]++
	}
	if seen["str128"] == 0 {
		t.Fatalf("no slot of two hits checked: %v", seen)
	}
}
