package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

// The give-back tables on the EVALSHA engine (Redis before 7) too.
func TestModesStandaloneScript(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.RunModes(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: true})
	})
}

// TestReturnParity drives memstore and Redis with the same random counts
// and give-backs (random costs, counted at random earlier instants, some
// in windows and buckets already gone or reusing a slot) of a fixed
// window and two sliding counters, and requires identical decisions and
// usage after every step.
func TestReturnParity(t *testing.T) {
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1})
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	limits := []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "rfw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(20, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "rswc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(20, 900*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "rswcp", Algorithm: ratelimit.SlidingWindowCounter, Precision: 250 * time.Millisecond, Rates: []ratelimit.Rate{rate(15, time.Second)}}),
	}
	rng := rand.New(rand.NewPCG(5, 6))
	now := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	returns := 0
	for step := range 1500 {
		now = now.Add(time.Duration(rng.Int64N(60_000)) * time.Microsecond)
		l := limits[rng.IntN(len(limits))]
		h := ratelimit.Hit{Limit: l, Key: "{r}k" + fmt.Sprint(rng.IntN(2)), Cost: 1 + rng.Int64N(6)}
		if rng.IntN(3) == 0 {
			at := []time.Time{now.Add(-time.Duration(rng.Int64N(int64(2 * l.Rates[0].Window))))}
			if err := ms.Return(ctx, now, []ratelimit.Hit{h}, at); err != nil {
				t.Fatal(err)
			}
			if err := rs.Return(ctx, now, []ratelimit.Hit{h}, at); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			returns++
		} else {
			want := make([]ratelimit.Decision, 1)
			got := make([]ratelimit.Decision, 1)
			wa, ga := decideBoth(t, ctx, ms, rs, now, []ratelimit.Hit{h}, want, got, step)
			if wa != ga || got[0] != want[0] {
				t.Fatalf("step %d (%s cost %d): got %v %+v, memstore %v %+v", step, l.Name, h.Cost, ga, got[0], wa, want[0])
			}
		}
		wu, err := ms.Usage(ctx, now, l, h.Key)
		if err != nil {
			t.Fatal(err)
		}
		gu, err := rs.Usage(ctx, now, l, h.Key)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(wu) != fmt.Sprint(gu) {
			t.Fatalf("step %d (%s): usage %+v, memstore %+v", step, l.Name, gu, wu)
		}
	}
	if returns < 300 {
		t.Fatalf("only %d give-backs", returns)
	}
}

// TestDecisionAtStoreClock: with ratelimit.ClockStore a decision reports the instant
// Redis decided at (between two readings of TIME around the call, on any
// topology); with ratelimit.ClockLocal it reports none (the caller's now is the
// instant).
func TestDecisionAtStoreClock(t *testing.T) {
	l := finished(t, ratelimit.Limit{Name: "at", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(100, time.Hour)}})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return newClient(t, standard.Addr) }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return newClusterClient(t, sharedCluster().Addrs()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client(t)
			for _, clock := range []ratelimit.Clock{ratelimit.ClockLocal, ratelimit.ClockStore} {
				s := newStore(t, c, redisstore.Options{Clock: clock, DenyCacheSize: -1})
				// Two keys in two slots: a Cluster decides them in two calls.
				hits := []ratelimit.Hit{{Limit: l, Key: "{a}at", Cost: 1}, {Limit: l, Key: "{b}at", Cost: 1}}
				out := make([]ratelimit.Decision, 2)
				before := redisTime(t, c)
				if ok, err := s.Decide(ctx, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), hits, out); err != nil || !ok {
					t.Fatalf("clock %d: %v %v", clock, ok, err)
				}
				after := redisTime(t, c)
				for i, d := range out {
					switch {
					case clock == ratelimit.ClockLocal && d.At != 0:
						t.Errorf("ratelimit.ClockLocal hit %d: At = %d, want 0", i, d.At)
					case clock == ratelimit.ClockStore && (d.At < before || d.At > after):
						t.Errorf("ratelimit.ClockStore hit %d: At = %d, want within Redis's [%d, %d]", i, d.At, before, after)
					}
				}
			}
		})
	}
}

// redisTime is Redis's TIME in ticks (on a Cluster, one master's).
func redisTime(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMicro()
}

// TestHybridReturnStoreClock: gateways on Redis's clock (ratelimit.ClockStore) whose
// own clocks are an hour off Redis's, either way, lease a batched fixed
// window and a batched sliding counter through hybrid stores and flush
// them: Redis then counts exactly what they admitted. Their own clocks
// name other windows and buckets than the ones Redis counted in; the
// give-back goes to Redis's instant of each count (Decision.At). Before,
// nothing was given back on Redis's clock and the leases stayed counted.
// On a standalone server and a Cluster.
func TestHybridReturnStoreClock(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { hybridReturnStoreClock(t, newClient(t, standard.Addr)) })
	t.Run("cluster", func(t *testing.T) { hybridReturnStoreClock(t, newClusterClient(t, sharedCluster().Addrs())) })
}

func hybridReturnStoreClock(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	b := &ratelimit.Batch{Interval: time.Minute, Lease: 16}
	limits := []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "hfw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1000, time.Hour)}, Batch: b}),
		finished(t, ratelimit.Limit{Name: "hswc", Algorithm: ratelimit.SlidingWindowCounter, Precision: time.Minute, Rates: []ratelimit.Rate{rate(1000, time.Hour)}, Batch: b}),
	}
	// Not within a few seconds of the end of Redis's hour or minute: the
	// counts must all fall in one window and one bucket.
	for {
		if us := redisTime(t, c) % int64(time.Minute/ratelimit.Tick); us < int64(55*time.Second/ratelimit.Tick) {
			break
		}
		time.Sleep(time.Second)
	}
	skews := []time.Duration{time.Hour + 17*time.Second, -time.Hour - 29*time.Second}
	o := redisstore.Options{Clock: ratelimit.ClockStore, DenyCacheSize: -1, Prefix: fmt.Sprintf("t%x:", rand.Uint32())}
	var gws []*hybrid.Store
	for range skews {
		gws = append(gws, hybrid.New(newStore(t, c, o), hybrid.Options{}))
	}
	out := make([]ratelimit.Decision, 1)
	admitted := 0
	for i := range 40 {
		g := i % len(gws)
		now := time.Now().Add(skews[g])
		for _, l := range limits {
			ok, err := gws[g].Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "{h}k", Cost: 1}}, out)
			if err != nil || !ok {
				t.Fatalf("request %d on %s: %v %v", i, l.Name, ok, err)
			}
		}
		admitted++
	}
	used := func(l *ratelimit.Limit) int64 {
		u, err := newStore(t, c, o).Usage(ctx, time.Now(), l, "{h}k")
		if err != nil {
			t.Fatal(err)
		}
		return u[0].Used
	}
	for _, l := range limits {
		if got := used(l); got <= int64(admitted) {
			t.Fatalf("%s: Redis counts %d units before the flush for %d admitted: the leases held nothing", l.Name, got, admitted)
		}
	}
	for g, s := range gws {
		s.Flush(ctx, time.Now().Add(skews[g]))
		if st := s.Stats(); st.Returned == 0 || st.Dropped != 0 {
			t.Fatalf("gateway %d: %+v", g, st)
		}
	}
	for _, l := range limits {
		if got := used(l); got != int64(admitted) {
			t.Errorf("%s: after the flush Redis counts %d units; the gateways admitted %d", l.Name, got, admitted)
		}
	}
}

// TestFlushManyKeysFewCalls: a gateway shutting down with leases of 300
// keys gives them all back in two script calls (256 hits per call), not
// one round trip per key, on the store clock; Redis then counts what was
// admitted, key by key.
func TestFlushManyKeysFewCalls(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	rs := newStore(t, newClient(t, srv.Addr), redisstore.Options{Clock: ratelimit.ClockStore, DenyCacheSize: -1})
	if err := rs.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	s := hybrid.New(rs, hybrid.Options{})
	l := finished(t, ratelimit.Limit{Name: "many", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(100, time.Hour)},
		Batch: &ratelimit.Batch{Interval: time.Minute, Lease: 8}})
	out := make([]ratelimit.Decision, 1)
	const keys = 300
	for i := range 2 * keys { // per key: a lease of 1, then of 2 (one unit left)
		if ok, err := s.Decide(ctx, time.Now(), []ratelimit.Hit{{Limit: l, Key: fmt.Sprintf("{m}%d", i%keys), Cost: 1}}, out); err != nil || !ok {
			t.Fatalf("request %d: %v %v", i, ok, err)
		}
	}
	before := commandCalls(t, srv, "fcall")
	s.Flush(ctx, time.Now())
	if n := commandCalls(t, srv, "fcall") - before; n != 2 {
		t.Fatalf("%d calls to give back the leases of %d keys, want 2", n, keys)
	}
	if st := s.Stats(); st.Returned != keys || st.Dropped != 0 {
		t.Fatalf("%+v, want %d units returned", st, keys)
	}
	for i := range keys {
		u, err := rs.Usage(ctx, time.Now(), l, fmt.Sprintf("{m}%d", i))
		if err != nil || u[0].Used != 2 {
			t.Fatalf("key %d: %v %v, want 2 used (2 admitted)", i, u, err)
		}
	}
}

// TestReturnClusterMasterDown gives back units on keys spread over a
// Cluster's three masters, one of them just killed: the give-backs on the
// masters that are up still land, and the dead master's failure is
// returned. The dead master's keys are in the lowest slot, so its call
// goes first (before the fix, its failure ended Return there).
func TestReturnClusterMasterDown(t *testing.T) {
	cl := redistest.Cluster(t)
	c := newClusterClient(t, cl.Addrs())
	ctx := context.Background()
	o := redisstore.Options{DenyCacheSize: -1, Prefix: fmt.Sprintf("t%x:", rand.Uint32())}
	s := newStore(t, c, o)
	l := finished(t, ratelimit.Limit{Name: "rdown", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(100, time.Hour)}})
	// One key per master, found by asking the cluster.
	byMaster := map[string]string{}
	for i := 0; len(byMaster) < 3 && i < 1000; i++ {
		k := fmt.Sprintf("{d%d}k", i)
		m, err := cl.KeySlotOwner(s.Key(l, k))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byMaster[m.Addr]; !ok {
			byMaster[m.Addr] = k
		}
	}
	if len(byMaster) != 3 {
		t.Fatalf("keys found on %d masters, want 3", len(byMaster))
	}
	var hits []ratelimit.Hit
	var at []time.Time
	lowest, lowestSlot := "", 1<<20
	for _, k := range byMaster {
		h := ratelimit.Hit{Limit: l, Key: k, Cost: 5}
		now := time.Now()
		if ok, err := s.Decide(ctx, now, []ratelimit.Hit{h}, make([]ratelimit.Decision, 1)); err != nil || !ok {
			t.Fatalf("count on %s: %v %v", k, ok, err)
		}
		hits = append(hits, ratelimit.Hit{Limit: l, Key: k, Cost: 3})
		at = append(at, now)
		if sl := redisstore.Slot(s.Key(l, k)); sl < lowestSlot {
			lowest, lowestSlot = k, sl
		}
	}
	dead, err := cl.KeySlotOwner(s.Key(l, lowest))
	if err != nil {
		t.Fatal(err)
	}
	dead.Kill()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.Return(rctx, time.Now(), hits, at); err == nil {
		t.Fatal("Return with a master down: no error")
	}
	for _, k := range byMaster {
		if k == lowest {
			continue
		}
		u, err := s.Usage(ctx, time.Now(), l, k)
		if err != nil {
			t.Fatal(err)
		}
		if u[0].Used != 2 {
			t.Errorf("%s on a master that is up: %d used after 5 counted and 3 given back, want 2", k, u[0].Used)
		}
	}
}
