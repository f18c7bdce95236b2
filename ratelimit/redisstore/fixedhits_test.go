package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// fixedLimits are one-window fixed windows as an Envoy rate limit
// service configuration compiles them (and a shadow one, and one whose
// cost may exceed its capacity), plus a two-window fixed window and a
// sliding counter, which send a call of several hits down the general
// path.
func fixedLimits(t testing.TB) (fixed, other []*ratelimit.Limit) {
	fixed = []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "a", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(5, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "b", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(3, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "c", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(9, 3*time.Second)}}),
		finished(t, ratelimit.Limit{Name: "shadow", Algorithm: ratelimit.FixedWindow, Shadow: true, Rates: []ratelimit.Rate{rate(2, 500*time.Millisecond)}}),
	}
	other = []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "fw2", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(4, time.Second), rate(10, 5*time.Second)}}),
		finished(t, ratelimit.Limit{Name: "swc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(7, time.Second)}}),
	}
	return fixed, other
}

// fixedCall draws a call of 2 to 5 hits: mostly fixed windows on a few
// keys (so that hits deny, windows turn and a key is sometimes named
// twice, which takes the general path), sometimes another limit or a
// fifth hit (the general path too), costs up to twice a capacity.
func fixedCall(rng *rand.Rand, fixed, other []*ratelimit.Limit) []ratelimit.Hit {
	n := 2 + rng.IntN(3)
	if rng.IntN(10) == 0 {
		n = 5
	}
	hits := make([]ratelimit.Hit, n)
	for i := range hits {
		l := fixed[rng.IntN(len(fixed))]
		if rng.IntN(12) == 0 {
			l = other[rng.IntN(len(other))]
		}
		cost := int64(1)
		if rng.IntN(5) == 0 {
			cost = 1 + rng.Int64N(2*l.Params(0).Capacity)
		}
		hits[i] = ratelimit.Hit{Limit: l, Key: "k" + strconv.Itoa(rng.IntN(3)), Cost: cost}
	}
	return hits
}

// TestFixedHitsParity drives memstore and the Redis store (Function
// library and EVALSHA) with calls of several hits on one-window fixed
// windows — the fixed-window path (lua/fixed_window.lua fixedn), which
// reads and checks every key before it counts in any, and answers a call
// counted everywhere with the counts alone — and requires identical
// decisions field by field, identical Usage, and that the path ran (the
// short replies and the full ones both seen). A call denied by one hit
// must count in none: memstore's Decide is the oracle of that rule.
func TestFixedHitsParity(t *testing.T) {
	for _, script := range []bool{false, true} {
		t.Run(fmt.Sprintf("script=%v", script), func(t *testing.T) {
			ctx := context.Background()
			rs, forms := fixedStore(t, ratelimit.ClockLocal, script)
			ms := memstore.New(memstore.Options{})
			fixed, other := fixedLimits(t)
			rng := rand.New(rand.NewPCG(11, 12))
			now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
			got, want := make([]ratelimit.Decision, 5), make([]ratelimit.Decision, 5)
			for step := range 3000 {
				switch r := rng.IntN(100); {
				case r < 3:
					now = now.Add(-time.Duration(rng.Int64N(300_000)) * time.Microsecond)
				case r < 85:
					now = now.Add(time.Duration(rng.Int64N(40_000)) * time.Microsecond)
				default:
					now = now.Add(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
				}
				hits := fixedCall(rng, fixed, other)
				wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
				if ga != wa || fmt.Sprint(got[:len(hits)]) != fmt.Sprint(want[:len(hits)]) {
					t.Fatalf("step %d at %s: %v: got %v %+v, memstore %v %+v",
						step, now.Format(time.RFC3339Nano), hitNames(hits), ga, got[:len(hits)], wa, want[:len(hits)])
				}
				if step%5 == 0 {
					for _, h := range hits {
						mu, err := ms.Usage(ctx, now, h.Limit, h.Key)
						if err != nil {
							t.Fatal(err)
						}
						ru, err := rs.Usage(ctx, now, h.Limit, h.Key)
						if err != nil {
							t.Fatal(err)
						}
						if fmt.Sprint(mu) != fmt.Sprint(ru) {
							t.Fatalf("step %d: Usage(%s, %s) = %v, memstore %v", step, h.Limit.Name, h.Key, ru, mu)
						}
					}
				}
			}
			seen := map[string]int{}
			for _, f := range forms.forms {
				seen[f]++
			}
			if seen["str16"]+seen["str24"]+seen["str32"] == 0 || seen["str"+strconv.Itoa(8*(2+7*2))] == 0 {
				t.Fatalf("the fixed-window path's replies were not both seen: %v", seen)
			}
		})
	}
}

// TestFixedHitsStoreClockParity: the same calls under the store clock
// (Redis TIME, the instant first in the counts' reply), each decided
// again on memstore at the instant Redis reported.
func TestFixedHitsStoreClockParity(t *testing.T) {
	ctx := context.Background()
	rs, forms := fixedStore(t, ratelimit.ClockStore, false)
	ms := memstore.New(memstore.Options{})
	fixed, other := fixedLimits(t)
	rng := rand.New(rand.NewPCG(13, 14))
	got, want := make([]ratelimit.Decision, 5), make([]ratelimit.Decision, 5)
	deadline := time.Now().Add(3 * time.Second) // bounds the run on a slow machine
	for step := 0; step < 2000 && time.Now().Before(deadline); step++ {
		hits := fixedCall(rng, fixed, other)
		ga, err := rs.Decide(ctx, time.Now(), hits, got)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		at := got[0].At
		if at == 0 {
			t.Fatalf("step %d: no store instant in %+v", step, got[0])
		}
		wa, err := ms.Decide(ctx, time.UnixMicro(at), hits, want)
		if err != nil {
			t.Fatal(err)
		}
		for i := range hits {
			if got[i].At != at {
				t.Fatalf("step %d: hit %d at %d, hit 0 at %d", step, i, got[i].At, at)
			}
			want[i].At = at
		}
		if ga != wa || fmt.Sprint(got[:len(hits)]) != fmt.Sprint(want[:len(hits)]) {
			t.Fatalf("step %d: %v: got %v %+v, memstore %v %+v", step, hitNames(hits), ga, got[:len(hits)], wa, want[:len(hits)])
		}
	}
	seen := map[string]int{}
	for _, f := range forms.forms {
		seen[f]++
	}
	if seen["str24"]+seen["str32"]+seen["str40"] == 0 {
		t.Fatalf("no counts reply: %v", seen)
	}
}

// TestFixedHitsTTL: the fixed-window path leaves every key it counts in
// with a TTL ending just past its window (a new window's SET PX; a count
// in the same window keeps it), and a key that lost its TTL gets one
// back at a call that does not count in it (here: denied by the other
// hit).
func TestFixedHitsTTL(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	if err := rs.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	const w = 10 * time.Second
	a := finished(t, ratelimit.Limit{Name: "a", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(100, w)}})
	b := finished(t, ratelimit.Limit{Name: "b", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1, w)}})
	now := time.Now().Truncate(w).Add(w) // a window's start
	out := make([]ratelimit.Decision, 2)
	hits := []ratelimit.Hit{{Limit: a, Key: "x", Cost: 1}, {Limit: b, Key: "y", Cost: 1}}
	if ok, err := rs.Decide(ctx, now, hits, out); err != nil || !ok {
		t.Fatalf("first call: %v %v %+v", ok, err, out)
	}
	ka, kb := rs.Key(a, "x"), rs.Key(b, "y")
	for _, k := range []string{ka, kb} {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > w+2*time.Second {
			t.Fatalf("%s: PTTL %v %v, want (0, %v]", k, ttl, err, w+2*time.Second)
		}
	}
	if err := c.Persist(ctx, ka).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := c.Get(ctx, ka).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rs.Decide(ctx, now.Add(time.Second), hits, out); err != nil || ok {
		t.Fatalf("second call: %v %v %+v, want denied by b", ok, err, out)
	}
	if after, _ := c.Get(ctx, ka).Result(); after != before {
		t.Fatalf("a call denied by b changed a's state")
	}
	if ttl, err := c.PTTL(ctx, ka).Result(); err != nil || ttl <= 0 || ttl > w+2*time.Second {
		t.Fatalf("%s after a denial: PTTL %v %v, want healed", ka, ttl, err)
	}
}

// fixedStore is formsStore with keys that outlive a stalled test: the
// parity tests decide on a virtual clock, and a key whose TTL (its
// window's end plus the margin, in real time) ran out while the machine
// stalled would be fresh on Redis and not on memstore.
func fixedStore(t *testing.T, clock ratelimit.Clock, script bool) (*redisstore.Store, *replyForms) {
	t.Helper()
	c := newClient(t, standard.Addr)
	forms := &replyForms{}
	c.AddHook(forms)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: script, Clock: clock, TTLMargin: time.Hour})
	if err := rs.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rs, forms
}

func hitNames(hits []ratelimit.Hit) string {
	s := ""
	for _, h := range hits {
		s += fmt.Sprintf("%s/%s×%d ", h.Limit.Name, h.Key, h.Cost)
	}
	return s
}
