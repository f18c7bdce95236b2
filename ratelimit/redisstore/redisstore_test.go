package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/childproc"
	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

// Processes shared by every test of the package: one standalone server
// started in TestMain, and a Sentinel group and a Cluster started on first
// use (they take seconds to form).
var (
	shared   = &redistest.Main{}
	standard *redistest.Server

	sentinelOnce sync.Once
	sentinel     *redistest.SentinelGroup
	clusterOnce  sync.Once
	cluster      *redistest.ClusterGroup
)

func TestMain(m *testing.M) {
	standard = redistest.Standalone(shared)
	code := m.Run()
	shared.Close()
	childproc.KillAll() // any server a test left running
	os.Exit(code)
}

func sharedSentinel() *redistest.SentinelGroup {
	sentinelOnce.Do(func() { sentinel = redistest.Sentinel(shared) })
	return sentinel
}

func sharedCluster() *redistest.ClusterGroup {
	clusterOnce.Do(func() { cluster = redistest.Cluster(shared) })
	return cluster
}

// The test clients mirror cmd/gateway's: RESP2, deadlines bound the socket and
// nothing is retried.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		PoolSize: 20, PoolTimeout: 200 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newClusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, MaxRetries: -1, MaxRedirects: 3, ContextTimeoutEnabled: true, Protocol: 2,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		PoolSize: 20, PoolTimeout: 200 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newFailoverClient(t testing.TB, g *redistest.SentinelGroup) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: g.Name, SentinelAddrs: g.SentinelAddrs(), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		PoolSize: 20, PoolTimeout: 200 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t testing.TB, c redis.UniversalClient, o redisstore.Options) *redisstore.Store {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("t%x:", rand.Uint32())
	}
	if o.Timeout == 0 {
		o.Timeout = time.Second // the conformance suite is about math, not speed
	}
	if o.NewLaneClient == nil {
		o.NewLaneClient = redis.NewClient // as the gateway builds its stores
	}
	s, err := redisstore.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformanceStandalone(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.Run(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

func TestOverrideTableStandalone(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.RunOverrides(t, func(t *testing.T) ratelimit.OverrideTable {
		return newStore(t, c, redisstore.Options{})
	})
}

func TestOverrideTableSentinel(t *testing.T) {
	c := newFailoverClient(t, sharedSentinel())
	storetest.RunOverrides(t, func(t *testing.T) ratelimit.OverrideTable {
		return newStore(t, c, redisstore.Options{})
	})
}

func TestOverrideTableCluster(t *testing.T) {
	c := newClusterClient(t, sharedCluster().Addrs())
	storetest.RunOverrides(t, func(t *testing.T) ratelimit.OverrideTable {
		return newStore(t, c, redisstore.Options{})
	})
}

// The EVALSHA engine (Redis before 7) decides as the Function library does.
func TestConformanceStandaloneScript(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.Run(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: true})
	})
}

// The deny cache must not change any decision the suite can observe.
func TestConformanceStandaloneDenyCache(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.Run(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{})
	})
}

func TestConformanceSentinel(t *testing.T) {
	c := newFailoverClient(t, sharedSentinel())
	storetest.Run(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

func TestConformanceCluster(t *testing.T) {
	c := newClusterClient(t, sharedCluster().Addrs())
	storetest.Run(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

// finished returns a finished limit or fails t.
func finished(t testing.TB, l ratelimit.Limit) *ratelimit.Limit {
	t.Helper()
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return &l
}

func rate(n int64, w time.Duration) ratelimit.Rate { return ratelimit.Rate{Limit: n, Window: w} }

// parityLimits covers every algorithm, several windows, bursts, precision
// and shadow mode.
func parityLimits(t testing.TB) []*ratelimit.Limit {
	return []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(5, time.Second), rate(12, 5*time.Second)}}),
		finished(t, ratelimit.Limit{Name: "el", Algorithm: ratelimit.FixedWindowElastic, Rates: []ratelimit.Rate{rate(4, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "log", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{rate(6, time.Second), rate(15, 4*time.Second)}}),
		finished(t, ratelimit.Limit{Name: "swc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(7, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "swcp", Algorithm: ratelimit.SlidingWindowCounter, Precision: 250 * time.Millisecond, Rates: []ratelimit.Rate{rate(9, time.Second), rate(20, 3*time.Second)}}),
		finished(t, ratelimit.Limit{Name: "tb", Algorithm: ratelimit.TokenBucket, Burst: 8, Rates: []ratelimit.Rate{rate(3, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "tb2", Algorithm: ratelimit.TokenBucket, Rates: []ratelimit.Rate{rate(7, 900*time.Millisecond), rate(30, 7*time.Second)}}),
		finished(t, ratelimit.Limit{Name: "gcra", Algorithm: ratelimit.GCRA, Burst: 5, Rates: []ratelimit.Rate{rate(4, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "gcra2", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(6, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "shadow", Algorithm: ratelimit.FixedWindow, Shadow: true, Rates: []ratelimit.Rate{rate(3, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "conc", Algorithm: ratelimit.Concurrency, MaxInFlight: 3}),
		// Large costs (parity draws up to 1.5 million units for it) on a log
		// near the largest a configuration may take.
		finished(t, ratelimit.Limit{Name: "biglog", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{rate(3_000_000, time.Second), rate(900_000, 300*time.Millisecond)}}),
	}
}

// TestParityRandom drives memstore and the Redis store with the same random
// requests (random limit subsets, keys, costs, instants moving forward and
// sometimes back) and requires identical decisions, field by field.
func TestParityRandom(t *testing.T) {
	for _, topo := range []string{"standalone", "standalone-script", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			var c redis.UniversalClient
			if topo != "cluster" {
				c = newClient(t, standard.Addr)
			} else {
				c = newClusterClient(t, sharedCluster().Addrs())
			}
			o := redisstore.Options{DenyCacheSize: -1, NoFunctions: topo == "standalone-script"}
			parity(t, newStore(t, c, o), 3000)
		})
	}
}

func parity(t *testing.T, rs *redisstore.Store, steps int) {
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	limits := parityLimits(t)
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	type held struct {
		hits   []ratelimit.Hit
		ms, rs []ratelimit.Decision
	}
	var inflight []held
	tags := []string{"{a}", "{b}", "{c}"}
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 3:
			now = now.Add(-time.Duration(rng.Int64N(300_000)) * time.Microsecond) // clock steps back
		case r < 70:
			now = now.Add(time.Duration(rng.Int64N(120_000)) * time.Microsecond)
		default:
			now = now.Add(time.Duration(rng.Int64N(2_000_000)) * time.Microsecond)
		}
		if len(inflight) > 0 && rng.IntN(4) == 0 {
			i := rng.IntN(len(inflight))
			h := inflight[i]
			inflight = append(inflight[:i], inflight[i+1:]...)
			if err := ms.Release(ctx, h.hits, h.ms); err != nil {
				t.Fatal(err)
			}
			if err := rs.Release(ctx, h.hits, h.rs); err != nil {
				t.Fatal(err)
			}
		}
		n := 1 + rng.IntN(3)
		hits := make([]ratelimit.Hit, n)
		tag := tags[rng.IntN(len(tags))]
		for i := range hits {
			l := limits[rng.IntN(len(limits))]
			key := tag + "k" + fmt.Sprint(rng.IntN(2))
			if rng.IntN(5) == 0 {
				key = tags[rng.IntN(len(tags))] + "shared" // another slot on a cluster
			}
			cost := int64(1)
			if rng.IntN(4) == 0 {
				cost = 1 + rng.Int64N(4)
			}
			if l.Name == "biglog" && rng.IntN(2) == 0 {
				cost = 1 + rng.Int64N(1_500_000)
			}
			hits[i] = ratelimit.Hit{Limit: l, Key: key, Cost: cost}
		}
		want := make([]ratelimit.Decision, n)
		got := make([]ratelimit.Decision, n)
		wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
		if wa != ga {
			t.Fatalf("step %d at %s: allowed = %v, memstore %v; hits %s", step, now.Format(time.RFC3339Nano), ga, wa, describe(hits))
		}
		for i := range hits {
			g, w := got[i], want[i]
			g.Lease, w.Lease = 0, 0 // Redis names a slot, memory its counter
			if g != w {
				t.Fatalf("step %d at %s: hit %d (%s cost %d key %s): got %+v, memstore %+v; hits %s",
					step, now.Format(time.RFC3339Nano), i, hits[i].Limit.Name, hits[i].Cost, hits[i].Key, got[i], want[i], describe(hits))
			}
		}
		if wa {
			inflight = append(inflight, held{hits, want, got})
		}
		if step%50 == 0 {
			for _, l := range limits {
				key := tags[0] + "k0"
				mu, err := ms.Usage(ctx, now, l, key)
				if err != nil {
					t.Fatal(err)
				}
				ru, err := rs.Usage(ctx, now, l, key)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(mu) != fmt.Sprint(ru) {
					t.Fatalf("step %d: Usage(%s) = %v, memstore %v", step, l.Name, ru, mu)
				}
			}
		}
	}
}

func describe(hits []ratelimit.Hit) string {
	s := ""
	for _, h := range hits {
		s += fmt.Sprintf("[%s %s c%d]", h.Limit.Name, h.Key, h.Cost)
	}
	return s
}

// TestClockStore checks the store's own clock: now passed by the caller is
// ignored, and a fixed window counts in Redis's current window.
func TestClockStore(t *testing.T) {
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{Clock: ratelimit.ClockStore, DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "store-clock", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(3, time.Hour)}})
	hit := []ratelimit.Hit{{Limit: l, Key: "{x}k", Cost: 1}}
	out := make([]ratelimit.Decision, 1)
	ancient := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC) // ignored
	for i := range 4 {
		ok, err := s.Decide(context.Background(), ancient, hit, out)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (i < 3) {
			t.Fatalf("request %d: allowed %v", i, ok)
		}
	}
	// Denied until the end of Redis's current hour: between 0 and 1h.
	if out[0].RetryAfter <= 0 || out[0].RetryAfter > time.Hour {
		t.Fatalf("RetryAfter = %s, want within the current hour", out[0].RetryAfter)
	}
	ttl := c.PTTL(context.Background(), s.Key(l, "{x}k")).Val()
	if ttl <= 0 || ttl > time.Hour+2*time.Second {
		t.Fatalf("TTL %s, want just past the window's end", ttl)
	}
}

func TestErrorsWrapErrStore(t *testing.T) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: 100 * time.Millisecond})
	srv.Stop()
	l := finished(t, ratelimit.Limit{Name: "e", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(3, time.Second)}})
	_, err := s.Decide(context.Background(), time.Now(), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, make([]ratelimit.Decision, 1))
	if !errors.Is(err, ratelimit.ErrStore) {
		t.Fatalf("Decide on a stopped server: %v, want ErrStore", err)
	}
}

// decideBoth decides hits at now on the memory store (the model) into
// want and on Redis into got, failing t (naming step) on a store error,
// and returns whether each allowed them.
func decideBoth(t *testing.T, ctx context.Context, ms, rs ratelimit.Store, now time.Time, hits []ratelimit.Hit, want, got []ratelimit.Decision, step int) (wa, ga bool) {
	t.Helper()
	wa, err := ms.Decide(ctx, now, hits, want)
	if err != nil {
		t.Fatalf("step %d: memstore: %v", step, err)
	}
	ga, err = rs.Decide(ctx, now, hits, got)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	return wa, ga
}
