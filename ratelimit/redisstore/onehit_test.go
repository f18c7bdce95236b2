package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// oneWindowLimits are limits the decide code serves by its one-hit path
// (one window, no delay, no penalty): every algorithm with a fixed-size
// state, bursts, precisions, shadow mode and windows short enough that a
// random walk crosses many of them.
func oneWindowLimits(t testing.TB) []*ratelimit.Limit {
	return []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(5, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "fwshadow", Algorithm: ratelimit.FixedWindow, Shadow: true, Rates: []ratelimit.Rate{rate(3, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "el", Algorithm: ratelimit.FixedWindowElastic, Rates: []ratelimit.Rate{rate(4, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "swc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(7, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "swcp", Algorithm: ratelimit.SlidingWindowCounter, Precision: 250 * time.Millisecond, Rates: []ratelimit.Rate{rate(9, time.Second)}}),
		// six buckets: a short reply with the local clock, the full one
		// with the store's (its instant makes it 9 doubles); seven: the
		// full reply always
		finished(t, ratelimit.Limit{Name: "swc6", Algorithm: ratelimit.SlidingWindowCounter, Precision: 100 * time.Millisecond, Rates: []ratelimit.Rate{rate(8, 600*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "swc7", Algorithm: ratelimit.SlidingWindowCounter, Precision: 100 * time.Millisecond, Rates: []ratelimit.Rate{rate(8, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "swcshadow", Algorithm: ratelimit.SlidingWindowCounter, Shadow: true, Precision: 100 * time.Millisecond, Rates: []ratelimit.Rate{rate(4, 300*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "tb", Algorithm: ratelimit.TokenBucket, Burst: 8, Rates: []ratelimit.Rate{rate(3, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "gcra", Algorithm: ratelimit.GCRA, Burst: 5, Rates: []ratelimit.Rate{rate(4, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "gcra2", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(6, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "gcrashadow", Algorithm: ratelimit.GCRA, Shadow: true, Rates: []ratelimit.Rate{rate(3, 500*time.Millisecond)}}),
	}
}

// TestOneHitParity drives memstore and the Redis store (Function library
// and EVALSHA) with single hits on one-window limits — the one-hit path,
// which inlines each algorithm and writes only what changed — and
// requires identical decisions field by field and identical usage: random
// keys, costs up to twice the capacity, instants moving forward, across
// windows and sometimes back.
func TestOneHitParity(t *testing.T) {
	for _, script := range []bool{false, true} {
		t.Run(fmt.Sprintf("script=%v", script), func(t *testing.T) {
			ctx := context.Background()
			rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1, NoFunctions: script})
			if err := rs.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			ms := memstore.New(memstore.Options{})
			limits := oneWindowLimits(t)
			rng := rand.New(rand.NewPCG(3, 4))
			now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
			got, want := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
			for step := range 3000 {
				switch r := rng.IntN(100); {
				case r < 3:
					now = now.Add(-time.Duration(rng.Int64N(300_000)) * time.Microsecond)
				case r < 80:
					now = now.Add(time.Duration(rng.Int64N(60_000)) * time.Microsecond)
				default:
					now = now.Add(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
				}
				l := limits[rng.IntN(len(limits))]
				cost := int64(1)
				if rng.IntN(4) == 0 {
					cost = 1 + rng.Int64N(2*l.Params(0).Capacity)
				}
				hits := []ratelimit.Hit{{Limit: l, Key: "k" + strconv.Itoa(rng.IntN(2)), Cost: cost}}
				wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
				if ga != wa || got[0] != want[0] {
					t.Fatalf("step %d at %s: %s cost %d on %s: got %v %+v, memstore %v %+v",
						step, now.Format(time.RFC3339Nano), l.Name, cost, hits[0].Key, ga, got[0], wa, want[0])
				}
				if step%7 == 0 {
					mu, err := ms.Usage(ctx, now, l, hits[0].Key)
					if err != nil {
						t.Fatal(err)
					}
					ru, err := rs.Usage(ctx, now, l, hits[0].Key)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(mu) != fmt.Sprint(ru) {
						t.Fatalf("step %d: Usage(%s) = %v, memstore %v", step, l.Name, ru, mu)
					}
				}
			}
		})
	}
}

// TestOneHitTTL: a count within the window a key already holds writes
// only the count (SETRANGE) and keeps the key's TTL, which still ends just
// past the window; a key that lost its TTL (PERSIST) gets one back at its
// next denial and at the first count of a later window — nothing the
// one-hit path writes may live forever.
func TestOneHitTTL(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	const w = 10 * time.Second
	for _, tc := range []struct {
		l *ratelimit.Limit
		// longest is the key's TTL at its window's first count, plus
		// the margin: a fixed window ends after W, a counter's newest
		// bucket leaves its window after W + P.
		longest time.Duration
	}{
		{finished(t, ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(3, w)}}), w + 2*time.Second},
		{finished(t, ratelimit.Limit{Name: "swc", Algorithm: ratelimit.SlidingWindowCounter, Precision: w, Rates: []ratelimit.Rate{rate(3, w)}}), 2*w + 2*time.Second},
	} {
		l := tc.l
		t.Run(l.Name, func(t *testing.T) {
			// The start of a window (and of a bucket): the TTL then ends
			// about one window from now.
			now := time.Now().Truncate(w).Add(w)
			key := s.Key(l, "ttl")
			out := make([]ratelimit.Decision, 1)
			decide := func(at time.Time, wantOK bool) {
				t.Helper()
				ok, err := s.Decide(ctx, at, []ratelimit.Hit{{Limit: l, Key: "ttl", Cost: 1}}, out)
				if err != nil || ok != wantOK {
					t.Fatalf("Decide at +%s: %v, %v; want allowed=%v", at.Sub(now), ok, err, wantOK)
				}
			}
			pttl := func() time.Duration {
				t.Helper()
				d, err := c.PTTL(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			setranges := func() int64 {
				t.Helper()
				return commandStats(t, c, "setrange")
			}
			decide(now, true)
			// (a new key: at least until its state expires, the margin
			// being 1 s)
			if d := pttl(); d < tc.longest-2*time.Second || d > tc.longest {
				t.Fatalf("TTL after the window's first count = %s, want just past the window (%s to %s)", d, tc.longest-2*time.Second, tc.longest)
			}
			sr := setranges()
			decide(now.Add(time.Second), true)
			if setranges() != sr+1 {
				t.Fatal("a count within the key's window did not write by SETRANGE")
			}
			if d := pttl(); d <= 0 || d > tc.longest {
				t.Fatalf("TTL after a count within the window = %s, want kept", d)
			}
			if v, err := c.Get(ctx, key).Result(); err != nil || len(v) < 16 {
				t.Fatalf("state after SETRANGE: %q, %v", v, err)
			}
			// Lost TTL, healed by a denial.
			if err := c.Persist(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			decide(now.Add(2*time.Second), true)
			decide(now.Add(2*time.Second), false)
			if d := pttl(); d <= 0 || d > tc.longest {
				t.Fatalf("TTL after a denial of a TTL-less key = %s, want healed", d)
			}
			// Lost TTL, healed by the first count of a later window.
			if err := c.Persist(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			decide(now.Add(2*w), true) // every earlier count out of the window
			if d := pttl(); d <= 0 || d > tc.longest {
				t.Fatalf("TTL after a later window's first count on a TTL-less key = %s, want healed", d)
			}
		})
	}
}

// commandStats returns INFO commandstats' calls of one command.
func commandStats(t testing.TB, c *redis.Client, name string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}

// TestOneHitManyLimits: the one-hit deciders Redis keeps (one per limit's
// packed parameters) are bounded, so a configuration of thousands of
// limits, plans or overrides — or reloads that keep changing them — does
// not grow Redis's Lua memory with them; past the bound, decisions stay
// exact (the deciders are built again).
func TestOneHitManyLimits(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	if err := rs.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	ms := memstore.New(memstore.Options{})
	vmFunctions := func() int64 {
		t.Helper()
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory_vm_functions:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("INFO memory has no used_memory_vm_functions (Redis before 7?)")
		return 0
	}
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	got, want := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
	decideAll := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			alg := []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.GCRA, ratelimit.TokenBucket}[i%4]
			l := finished(t, ratelimit.Limit{Name: "many" + strconv.Itoa(i), Algorithm: alg, Rates: []ratelimit.Rate{rate(int64(2+i), time.Second)}})
			for k := range 3 {
				hits := []ratelimit.Hit{{Limit: l, Key: "k", Cost: int64(1 + k*i%3)}}
				wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, 0)
				if ga != wa || got[0] != want[0] {
					t.Fatalf("limit %d call %d: got %v %+v, memstore %v %+v", i, k, ga, got[0], wa, want[0])
				}
			}
		}
	}
	decideAll(0, 300) // past the bound once: the cache is full of these
	before := vmFunctions()
	decideAll(300, 3300)
	// 3000 more limits would hold ~3000 deciders (closures, tables and
	// parameter strings, ~1 KB each) if nothing bounded them.
	grown := vmFunctions() - before
	t.Logf("Redis's Lua memory grew %d bytes over 3000 more limits", grown)
	if grown > 1<<20 {
		t.Fatalf("Redis's Lua memory grew %d bytes over 3000 more limits, want bounded", grown)
	}
}
