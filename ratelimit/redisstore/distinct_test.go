package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestDistinctParity decides the same random requests on the memory store
// and on Redis (Function library, EVALSHA, Cluster) and requires identical
// decisions and usage, field by field: distinct limits in their exact
// range and past it (the estimate, its sub-windows sliding), alone and
// beside other limits (a concurrency one moves the values' arguments
// after the members), with a penalty box.
func TestDistinctParity(t *testing.T) {
	for _, topo := range []string{"standalone", "standalone-script", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			var c redis.UniversalClient
			if topo != "cluster" {
				c = newClient(t, standard.Addr)
			} else {
				c = newClusterClient(t, sharedCluster().Addrs())
			}
			o := redisstore.Options{DenyCacheSize: -1, NoFunctions: topo == "standalone-script"}
			distinctParity(t, newStore(t, c, o), 2500)
		})
	}
}

func distinctParity(t *testing.T, rs *redisstore.Store, steps int) {
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	small := finished(t, ratelimit.Limit{Name: "dsmall", Algorithm: ratelimit.Distinct, Precision: 500 * time.Millisecond,
		Rates: []ratelimit.Rate{rate(5, 2*time.Second)}})
	exact := finished(t, ratelimit.Limit{Name: "dexact", Algorithm: ratelimit.Distinct,
		Rates: []ratelimit.Rate{rate(ratelimit.DistinctExact, 4*time.Second)}})
	big := finished(t, ratelimit.Limit{Name: "dbig", Algorithm: ratelimit.Distinct, Precision: time.Second,
		Rates: []ratelimit.Rate{rate(400, 3*time.Second)}})
	fixed := finished(t, ratelimit.Limit{Name: "fixed", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(50, time.Second)}})
	conc := finished(t, ratelimit.Limit{Name: "conc", Algorithm: ratelimit.Concurrency, MaxInFlight: 1000})
	boxed := finished(t, ratelimit.Limit{Name: "dboxed", Algorithm: ratelimit.Distinct, Penalty: 700 * time.Millisecond,
		Rates: []ratelimit.Rate{rate(3, 2*time.Second)}})
	limits := []*ratelimit.Limit{small, exact, big, big, big, fixed, conc, boxed}
	rng := rand.New(rand.NewPCG(5, 6))
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	tags := []string{"{a}", "{b}"}
	var bigUsed int64 // the most values big held: past the exact range?
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 2:
			now = now.Add(-time.Duration(rng.Int64N(700_000)) * time.Microsecond) // clock steps back
		case r < 98:
			now = now.Add(time.Duration(rng.Int64N(1_500)) * time.Microsecond)
		default:
			now = now.Add(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
		}
		n := 1 + rng.IntN(3)
		hits := make([]ratelimit.Hit, n)
		tag := tags[rng.IntN(len(tags))]
		for i := range hits {
			l := limits[rng.IntN(len(limits))]
			universe := uint64(8)
			if l == big || l == exact {
				universe = 1500
			}
			hits[i] = ratelimit.Hit{Limit: l, Key: tag + "k", Cost: 1 + rng.Int64N(2),
				Value: (1 + rng.Uint64N(universe)) * 0x9e3779b97f4a7c15}
		}
		want := make([]ratelimit.Decision, n)
		got := make([]ratelimit.Decision, n)
		wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
		if wa != ga {
			t.Fatalf("step %d: allowed = %v, memstore %v; hits %s", step, ga, wa, describe(hits))
		}
		for i := range hits {
			g, w := got[i], want[i]
			g.Lease, w.Lease = 0, 0
			if g != w {
				t.Fatalf("step %d: hit %d (%s value %x): got %+v, memstore %+v; hits %s",
					step, i, hits[i].Limit.Name, hits[i].Value, got[i], want[i], describe(hits))
			}
		}
		if wa {
			if err := ms.Release(ctx, hits, want); err != nil {
				t.Fatal(err)
			}
			if err := rs.Release(ctx, hits, got); err != nil {
				t.Fatal(err)
			}
		}
		if step%25 == 0 {
			for _, l := range []*ratelimit.Limit{small, exact, big} {
				mu, err := ms.Usage(ctx, now, l, tag+"k")
				if err != nil {
					t.Fatal(err)
				}
				ru, err := rs.Usage(ctx, now, l, tag+"k")
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(mu) != fmt.Sprint(ru) {
					t.Fatalf("step %d: Usage(%s) = %v, memstore %v", step, l.Name, ru, mu)
				}
				if l == big {
					bigUsed = max(bigUsed, mu[0].Used)
				}
			}
		}
	}
	if bigUsed <= ratelimit.DistinctExact {
		t.Fatalf("limit %s held at most %d values: never estimated", big.Name, bigUsed)
	}
}

// TestDistinctDenyCache checks that the deny cache never answers a
// distinct hit: a new value's denial says nothing of a counted value,
// which must pass. Without the bypass the counted value is denied from
// the cache.
func TestDistinctDenyCache(t *testing.T) {
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: 1024})
	l := finished(t, ratelimit.Limit{Name: "dcache", Algorithm: ratelimit.Distinct, Rates: []ratelimit.Rate{rate(1, time.Hour)}})
	now := time.Now()
	out := make([]ratelimit.Decision, 1)
	for i, c := range []struct {
		v    uint64
		want bool
	}{{1, true}, {2, false}, {1, true}, {2, false}, {1, true}} {
		got, err := rs.Decide(context.Background(), now, []ratelimit.Hit{{Limit: l, Key: "{d}k", Cost: 1, Value: c.v}}, out)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Fatalf("request %d (value %d): allowed %v, want %v", i, c.v, got, c.want)
		}
	}
}

// TestDistinctRedisBounded: past the exact range a distinct key on Redis
// is the fixed-size estimated layout (553 bytes of header, the union, and
// one register array and one bitmap per sub-window), whatever the number of values, and
// carries a TTL of at most its window (and margin).
func TestDistinctRedisBounded(t *testing.T) {
	c := newClient(t, standard.Addr)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "dbound", Algorithm: ratelimit.Distinct, Rates: []ratelimit.Rate{rate(ratelimit.DistinctMaxLimit, time.Hour)}})
	r := rand.New(rand.NewPCG(9, 9))
	now := time.Now()
	out := make([]ratelimit.Decision, 1)
	ctx := context.Background()
	for i := range 3000 {
		if ok, err := rs.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "{b}k", Cost: 1, Value: r.Uint64()}}, out); err != nil || !ok {
			t.Fatalf("value %d: %v %v", i, ok, err)
		}
	}
	key := rs.Key(l, "{b}k")
	want := int64(553 + ratelimit.DistinctRegisters*(ratelimit.DistinctDefaultBuckets+1) + ratelimit.DistinctBitmap/8*ratelimit.DistinctDefaultBuckets)
	if n := c.StrLen(ctx, key).Val(); n != want {
		t.Fatalf("STRLEN = %d, want %d", n, want)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour+10*time.Second {
		t.Fatalf("PTTL = %s, want within the window", ttl)
	}
	if used := out[0].Limit - out[0].Remaining; used < 2900 || used > 3100 {
		t.Fatalf("estimated %d values of 3000", used)
	}
}

// TestDistinctClusterRefund: on a Cluster, a request whose distinct hit
// is in one slot and whose other limit, in another slot, denies it is
// denied without a store error; the other slot's counter is given back,
// and the distinct value, which cannot be, stays counted (ARCHITECTURE.md
// "distinct").
func TestDistinctClusterRefund(t *testing.T) {
	c := newClusterClient(t, sharedCluster().Addrs())
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	d := finished(t, ratelimit.Limit{Name: "drefund", Algorithm: ratelimit.Distinct, Rates: []ratelimit.Rate{rate(10, time.Hour)}})
	f := finished(t, ratelimit.Limit{Name: "frefund", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1, time.Hour)}})
	if redisstore.Slot("{a}k") == redisstore.Slot("{c}k") {
		t.Fatal("the keys share a slot")
	}
	ctx := context.Background()
	now := time.Now()
	out := make([]ratelimit.Decision, 2)
	for i, want := range []bool{true, false} {
		// Slots go in ascending order: the distinct one ({c}, 7365)
		// counts before the fixed window's ({a}, 15495) denies.
		hits := []ratelimit.Hit{{Limit: d, Key: "{c}k", Cost: 1, Value: uint64(i + 1)}, {Limit: f, Key: "{a}k", Cost: 1}}
		ok, err := rs.Decide(ctx, now, hits, out)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if ok != want {
			t.Fatalf("request %d: allowed %v, want %v", i, ok, want)
		}
	}
	u, err := rs.Usage(ctx, now, d, "{c}k")
	if err != nil {
		t.Fatal(err)
	}
	if u[0].Used != 2 {
		t.Fatalf("distinct values counted: %d, want 2 (the denied request's value stays counted)", u[0].Used)
	}
	if uf, err := rs.Usage(ctx, now, f, "{a}k"); err != nil || uf[0].Used != 1 {
		t.Fatalf("fixed window after the refund: %+v, %v; want 1 used", uf, err)
	}
}

// TestDistinctEmptiedThenClockBack: an estimated key whose values have all
// left is decided on a fresh state, and a request on a clock then stepped
// back finds the stored state again, on both stores. Redis used to delete
// the key on the spot, while the memory store keeps a state past its
// expiry (as for every algorithm): the request was admitted on Redis
// (Remaining 9) and denied in memory.
func TestDistinctEmptiedThenClockBack(t *testing.T) {
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1})
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	l := finished(t, ratelimit.Limit{Name: "dempty", Algorithm: ratelimit.Distinct, Precision: time.Second,
		Rates: []ratelimit.Rate{rate(10, 2*time.Second)}})
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	step := 0
	both := func(at time.Time, v uint64, mode ratelimit.HitMode) {
		t.Helper()
		hits := []ratelimit.Hit{{Limit: l, Key: "{e}k", Cost: 1, Value: v, Mode: mode}}
		want, got := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
		wa, ga := decideBoth(t, ctx, ms, rs, at, hits, want, got, step)
		step++
		if wa != ga || want[0] != got[0] {
			t.Fatalf("step %d at %s: redis %v %+v, memstore %v %+v", step, at.Format("15:04:05.000"), ga, got[0], wa, want[0])
		}
	}
	for v := range uint64(200) { // past the exact range (taken: the limit is 10)
		both(t0, (v+1)*0x9e3779b97f4a7c15, ratelimit.HitTake)
	}
	both(t0.Add(time.Second), 1, ratelimit.HitPeek)            // moved on a sub-window
	both(t0.Add(2*time.Second), 2, ratelimit.HitPeek)          // every value has left
	both(t0.Add(1500*time.Millisecond), 3, ratelimit.HitCount) // the clock steps back
	both(t0.Add(3200*time.Millisecond), 4, ratelimit.HitPeek)
}

// TestDistinctMoveParity holds the Redis store's move of an estimated key
// to a later sub-window (only the registers a leaving slot held
// recomputed, lua/distinct.lua moveunion) to the memory store's full
// recomputation: keys of hundreds to 7,000 values a sub-window (sparse
// and dense slots), values re-seen
// across sub-windows (several slots holding a union register's value)
// and new ones, moves of one to N sub-windows and back in time. Every
// decision and the estimate (Usage) must agree.
func TestDistinctMoveParity(t *testing.T) {
	c := newClient(t, standard.Addr)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	l := finished(t, ratelimit.Limit{Name: "dmove", Algorithm: ratelimit.Distinct, Precision: time.Second,
		Rates: []ratelimit.Rate{rate(ratelimit.DistinctMaxLimit, 4*time.Second)}})
	rng := rand.New(rand.NewPCG(11, 12))
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	pool := make([]uint64, 7000)
	for k := range pool {
		pool[k] = rng.Uint64()
	}
	out := make([]ratelimit.Decision, 1)
	want := make([]ratelimit.Decision, 1)
	for step := range 60 {
		switch r := rng.IntN(10); {
		case r < 6:
			now = now.Add(time.Second)
		case r < 8:
			now = now.Add(time.Duration(2+rng.IntN(3)) * time.Second)
		case r < 9:
			now = now.Add(-time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
		n, dense := rng.IntN(600), rng.IntN(4) == 0
		if dense {
			// the whole pool in this sub-window: a slot of most
			// registers (the move's dense branch)
			n = len(pool)
		}
		for k := range n {
			v := pool[rng.IntN(len(pool))]
			switch {
			case dense:
				v = pool[k]
			case rng.IntN(3) == 0:
				v = rng.Uint64()
			}
			hits := []ratelimit.Hit{{Limit: l, Key: "{mv}k", Cost: 1, Value: v}}
			wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, out, step)
			if wa != ga || want[0] != out[0] {
				t.Fatalf("step %d.%d: redis %v %+v, memstore %v %+v", step, k, ga, out[0], wa, want[0])
			}
		}
		mu, err := ms.Usage(ctx, now, l, "{mv}k")
		if err != nil {
			t.Fatal(err)
		}
		ru, err := rs.Usage(ctx, now, l, "{mv}k")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(mu) != fmt.Sprint(ru) {
			t.Fatalf("step %d: Usage = %v, memstore %v", step, ru, mu)
		}
	}
}
