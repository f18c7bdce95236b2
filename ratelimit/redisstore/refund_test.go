package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"

	"github.com/redis/go-redis/v9"
)

// tagIn returns a key "{prefix<n>}k" for the first n whose Redis key for
// limit l lands in a slot accepted by ok.
func tagIn(t *testing.T, s *redisstore.Store, l *ratelimit.Limit, prefix string, ok func(slot int) bool) string {
	t.Helper()
	return keyIn(t, s, l, func(n int) string { return fmt.Sprintf("{%s%d}k", prefix, n) }, ok)
}

// sharedIn is tagIn for a key of a limit not keyed by client: "{T}T", its
// own hash tag, as the gateway builds them.
func sharedIn(t *testing.T, s *redisstore.Store, l *ratelimit.Limit, prefix string, ok func(slot int) bool) string {
	t.Helper()
	return keyIn(t, s, l, func(n int) string { return fmt.Sprintf("{%s%d}%[1]s%[2]d", prefix, n) }, ok)
}

func keyIn(t *testing.T, s *redisstore.Store, l *ratelimit.Limit, key func(n int) string, ok func(slot int) bool) string {
	t.Helper()
	for n := range 100_000 {
		k := key(n)
		if ok(redisstore.Slot(s.Key(l, k))) {
			return k
		}
	}
	t.Fatalf("no key like %q in the wanted slots", key(0))
	return ""
}

// pow2Window is 2^32 µs (about 71.6 min): with a power-of-two limit, the
// refill per tick L/W and the emission interval W/L are powers of two, so
// every double of token_bucket and gcra is exact and a refund's inverse
// lands on the very bits a store that never saw the request holds.
const pow2Window = time.Duration(1<<32) * time.Microsecond

// refundLimits has one limit per algorithm (two windows where the state is
// per window), with slow rates so that instants seconds apart still see the
// refunded units.
func refundLimits(t testing.TB) []*ratelimit.Limit {
	return []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(8, time.Hour), rate(20, 24*time.Hour)}}),
		finished(t, ratelimit.Limit{Name: "el", Algorithm: ratelimit.FixedWindowElastic, Rates: []ratelimit.Rate{rate(8, time.Minute)}}),
		finished(t, ratelimit.Limit{Name: "log", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{rate(8, time.Minute), rate(20, time.Hour)}}),
		finished(t, ratelimit.Limit{Name: "swc", Algorithm: ratelimit.SlidingWindowCounter, Precision: 10 * time.Second, Rates: []ratelimit.Rate{rate(8, time.Minute)}}),
		finished(t, ratelimit.Limit{Name: "tb", Algorithm: ratelimit.TokenBucket, Rates: []ratelimit.Rate{rate(8, pow2Window)}}),
		finished(t, ratelimit.Limit{Name: "gcra", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(8, pow2Window)}}),
		finished(t, ratelimit.Limit{Name: "conc", Algorithm: ratelimit.Concurrency, MaxInFlight: 8}),
	}
}

// TestClusterRefundRestores: per algorithm, a request counted in an earlier
// slot and then denied by a later one leaves its key deciding exactly like
// a key that never saw the request, both through the exact restore of an
// untouched key and through the inverse operation (forced), from a fresh
// key and from one already in use.
func TestClusterRefundRestores(t *testing.T) {
	ctx := context.Background()
	c := newClusterClient(t, sharedCluster().Addrs())
	deny := finished(t, ratelimit.Limit{Name: "deny", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1, time.Hour)}})
	for _, path := range []string{"restore", "inverse"} {
		s := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
		decide := s.Decide
		if path == "inverse" {
			decide = func(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
				return s.DecideInverseRefunds(ctx, now, hits, out)
			}
		}
		// The denying key sits in a high slot, so every tested key's slot
		// is decided (and counted) first.
		denyKey := tagIn(t, s, deny, "d", func(slot int) bool { return slot > 15000 })
		t0 := time.Date(2025, 6, 1, 10, 20, 0, 0, time.UTC)
		one := make([]ratelimit.Decision, 1)
		if ok, err := s.Decide(ctx, t0.Add(-time.Minute), []ratelimit.Hit{{Limit: deny, Key: denyKey, Cost: 1}}, one); err != nil || !ok {
			t.Fatalf("exhausting the denying key: %v %v", ok, err)
		}
		for _, l := range refundLimits(t) {
			for _, seeded := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/seeded=%v", path, l.Name, seeded), func(t *testing.T) {
					low := func(slot int) bool { return slot < 15000 }
					key := tagIn(t, s, l, l.Name+"r"+fmt.Sprint(seeded), low)
					control := tagIn(t, s, l, l.Name+"c"+fmt.Sprint(seeded), low)
					both := func(at time.Time, cost int64) (ratelimit.Decision, ratelimit.Decision) {
						t.Helper()
						var d [2]ratelimit.Decision
						for i, k := range []string{key, control} {
							if _, err := s.Decide(ctx, at, []ratelimit.Hit{{Limit: l, Key: k, Cost: cost}}, one); err != nil {
								t.Fatal(err)
							}
							d[i] = one[0]
							d[i].Lease = 0 // a slot's name, unique per acquire
						}
						return d[0], d[1]
					}
					if seeded {
						both(t0.Add(-3*time.Second), 2)
						both(t0.Add(-time.Second), 1)
					}
					// The request: 3 units on key, then denied by denyKey.
					out := make([]ratelimit.Decision, 2)
					hits := []ratelimit.Hit{{Limit: l, Key: key, Cost: 3}, {Limit: deny, Key: denyKey, Cost: 1}}
					ok, err := decide(ctx, t0, hits, out)
					if err != nil || ok {
						t.Fatalf("request: allowed %v, err %v; want denied", ok, err)
					}
					if !out[0].Allowed || out[1].Allowed || out[0].Counted {
						t.Fatalf("request decisions %+v, want the first allowed, not counted, the second denied", out)
					}
					if s.Stats().Refunds == 0 {
						t.Fatal("no refund recorded")
					}
					// Afterwards (past the store timeout, which bounds the
					// refund's instant), both keys decide alike.
					for i, step := range []struct {
						after time.Duration
						cost  int64
					}{{2 * time.Second, 1}, {2 * time.Second, 4}, {3 * time.Second, 1}, {4 * time.Second, 3}, {5 * time.Second, 8}, {30 * time.Second, 2}, {61 * time.Second, 5}} {
						at := t0.Add(step.after)
						got, want := both(at, step.cost)
						if got != want {
							t.Fatalf("step %d (+%s cost %d): refunded key %+v, control %+v", i, step.after, step.cost, got, want)
						}
						if i == 0 && !got.Allowed {
							t.Fatalf("step 0 denied: %+v", got)
						}
						ru, err := s.Usage(ctx, at, l, key)
						if err != nil {
							t.Fatal(err)
						}
						cu, err := s.Usage(ctx, at, l, control)
						if err != nil {
							t.Fatal(err)
						}
						if fmt.Sprint(ru) != fmt.Sprint(cu) {
							t.Fatalf("step %d: Usage %v, control %v", i, ru, cu)
						}
					}
				})
			}
		}
	}
}

// TestClusterRefundConcurrent reproduces a burst on layered limits on a Cluster in
// process: a per-client limit of 4 (each client's slot) and a shared limit
// of 25 (another slot, between the clients' slots, its key "{T}T" as the
// gateway builds it),
// 1,000 concurrent requests over ten clients, two of them sending half the
// requests so that they are denied by their own limit (and refund the
// shared one) while the shared limit still has room: exactly the shared
// limit's 25 are admitted and the shared counter holds exactly 25 units
// afterwards.
//
// The test checks counts, not speed: its 1,000 workers queue for 20 pooled
// connections per node, and on a loaded 2-core machine under the race
// detector a burst's last request waits for seconds (it once failed with
// the usual 200 ms pool wait and 1 s store budget). Both budgets are
// therefore a minute, far beyond any queueing, so a timeout here means a
// hang, not a slow machine.
func TestClusterRefundConcurrent(t *testing.T) {
	ctx := context.Background()
	const patience = time.Minute
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: sharedCluster().Addrs(), MaxRetries: -1, MaxRedirects: 3, ContextTimeoutEnabled: true,
		DialTimeout: patience, ReadTimeout: patience, WriteTimeout: patience,
		PoolSize: 20, PoolTimeout: patience,
	})
	t.Cleanup(func() { c.Close() })
	algs := []ratelimit.Algorithm{ratelimit.SlidingWindowLog, ratelimit.FixedWindow, ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindowElastic}
	for _, gateways := range []int{1, 2} {
		for _, alg := range algs {
			t.Run(fmt.Sprintf("gateways=%d/%s", gateways, alg), func(t *testing.T) {
				// One gateway keeps its deny cache (which must not keep
				// a denial caused by its own pending refunds); two share
				// Redis without one (a deny cache sees only its own holds).
				stores := make([]*redisstore.Store, gateways)
				prefix := fmt.Sprintf("cc%d%d-%x:", gateways, alg, rand.Uint32())
				for i := range stores {
					o := redisstore.Options{Prefix: prefix, Timeout: patience}
					if gateways > 1 {
						o.DenyCacheSize = -1
					}
					stores[i] = newStore(t, c, o)
				}
				s := stores[0]
				perClient := finished(t, ratelimit.Limit{Name: "pc", Algorithm: alg, Rates: []ratelimit.Rate{rate(4, time.Hour)}})
				shared := finished(t, ratelimit.Limit{Name: "shared", Algorithm: alg, Rates: []ratelimit.Rate{rate(25, time.Hour)}})
				sharedKey := sharedIn(t, s, shared, "shared", func(slot int) bool { return slot > 6000 && slot < 10000 })
				sharedSlot := redisstore.Slot(s.Key(shared, sharedKey))
				var clients []string
				for i := range 10 {
					before := i%2 == 0 // alternate: client slot before / after the shared one
					clients = append(clients, tagIn(t, s, perClient, fmt.Sprintf("client%d-", i), func(slot int) bool {
						return (slot < sharedSlot) == before
					}))
				}
				perAdmitted := map[string]*atomic.Int64{}
				for _, c := range clients {
					perAdmitted[c] = new(atomic.Int64)
				}
				const n, workers = 1000, 1000 // all at once, as in a burst
				// One instant for the whole burst: with instants out of
				// order (a goroutine's time.Now() taken long before its
				// script runs), gcra denies its last unit to a request
				// dated before the first admitted one, refunds or not.
				at := time.Now()
				var next, admitted atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, workers)
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						out := make([]ratelimit.Decision, 2)
						st := stores[w%len(stores)]
						for {
							i := next.Add(1) - 1
							if i >= n {
								return
							}
							client := clients[i%2] // hot
							if i%4 >= 2 {
								client = clients[2+(i/4)%8]
							}
							hits := []ratelimit.Hit{{Limit: perClient, Key: client, Cost: 1}, {Limit: shared, Key: sharedKey, Cost: 1}}
							ok, err := st.Decide(ctx, at, hits, out)
							if err != nil {
								errs <- err
								return
							}
							if ok {
								admitted.Add(1)
								perAdmitted[client].Add(1)
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				if got := admitted.Load(); got != 25 {
					t.Errorf("%d of %d admitted, want exactly the shared limit 25", got, n)
				}
				u, err := s.Usage(ctx, at, shared, sharedKey)
				if err != nil {
					t.Fatal(err)
				}
				if u[0].Used != 25 {
					t.Errorf("shared limit used %d after the burst, want 25 (units of denied requests kept?)", u[0].Used)
				}
				for i, c := range clients {
					u, err := s.Usage(ctx, at, perClient, c)
					if err != nil {
						t.Fatal(err)
					}
					if u[0].Used != perAdmitted[c].Load() {
						t.Errorf("client %d: limit used %d, %d admitted", i, u[0].Used, perAdmitted[c].Load())
					}
				}
				var refunds uint64
				for _, st := range stores {
					refunds += st.Stats().Refunds
				}
				t.Logf("%d admitted, shared used %d, %d refunds", admitted.Load(), u[0].Used, refunds)
			})
		}
	}
}

// TestClusterManyHits: a request with more hits than any fixed-size
// bookkeeping (40 limits on one client's slot, plus a shared limit in
// another slot) is decided on a Cluster: allowed and counted once on
// every key, then denied by the shared limit with every one of the 40
// keys refunded.
func TestClusterManyHits(t *testing.T) {
	ctx := context.Background()
	c := newClusterClient(t, sharedCluster().Addrs())
	s := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	shared := finished(t, ratelimit.Limit{Name: "shared", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1, time.Hour)}})
	const n = 40
	var hits []ratelimit.Hit
	for i := range n {
		l := finished(t, ratelimit.Limit{Name: fmt.Sprintf("many%d", i), Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(5, time.Hour)}})
		hits = append(hits, ratelimit.Hit{Limit: l, Key: "{many-client}k", Cost: 1})
	}
	sharedKey := sharedIn(t, s, shared, "many-shared", func(slot int) bool { return slot != redisstore.Slot(s.Key(hits[0].Limit, hits[0].Key)) })
	hits = append(hits, ratelimit.Hit{Limit: shared, Key: sharedKey, Cost: 1})
	t0 := time.Date(2025, 6, 1, 10, 20, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, len(hits))
	for round, want := range []bool{true, false} {
		ok, err := s.Decide(ctx, t0.Add(time.Duration(round)*time.Second), hits, out)
		if err != nil || ok != want {
			t.Fatalf("round %d: allowed %v, err %v; want %v", round, ok, err, want)
		}
		for i := range n {
			if !out[i].Allowed || out[i].Counted != want || out[i].Remaining != 4 {
				t.Fatalf("round %d hit %d: %+v, want allowed, counted %v, 4 remaining", round, i, out[i], want)
			}
		}
	}
	for i := range n {
		u, err := s.Usage(ctx, t0.Add(3*time.Second), hits[i].Limit, hits[i].Key)
		if err != nil || u[0].Remaining != 4 {
			t.Fatalf("hit %d after the refund: %v %v, want 4 remaining", i, u, err)
		}
	}
}
