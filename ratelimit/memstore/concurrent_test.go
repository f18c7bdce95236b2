package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestConcurrentMultiLimit: 64 goroutines send 2,000 requests, each hitting
// three limits at once (5/hour per client over 10 clients, 40/hour shared,
// 10,000/hour per route), all dated at one instant. A request counts in
// every limit or in none, so whatever the interleaving, the naive model
// gives: exactly 40 admitted (the clients' room, 50, exceeds the shared
// 40, and each client keeps sending), no client above 5, and every
// counter holding exactly what was admitted through it. Run it with -race:
// shards, LRU links and multi-key decisions are all under contention.
func TestConcurrentMultiLimit(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowLog,
		ratelimit.SlidingWindowCounter, ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindowElastic} {
		t.Run(alg.String(), func(t *testing.T) {
			mk := func(name string, n int64) *ratelimit.Limit {
				l := &ratelimit.Limit{Name: name, Algorithm: alg, Rates: []ratelimit.Rate{{Limit: n, Window: time.Hour}}}
				if err := l.Finish(); err != nil {
					t.Fatal(err)
				}
				return l
			}
			perClient, shared, route := mk("client", 5), mk("shared", 40), mk("route", 10_000)
			s := memstore.New(memstore.Options{MaxKeys: 1000, Shards: 4})
			defer s.Close()
			ctx := context.Background()
			now := time.Unix(1_700_000_000, 0)
			const requests, workers, clients = 2000, 64, 10
			var next, admitted atomic.Int64
			var perAdmitted [clients]atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out := make([]ratelimit.Decision, 3)
					for {
						i := next.Add(1) - 1
						if i >= requests {
							return
						}
						c := int(i % clients)
						hits := []ratelimit.Hit{
							{Limit: perClient, Key: fmt.Sprintf("c%d", c), Cost: 1},
							{Limit: shared, Key: "all", Cost: 1},
							{Limit: route, Key: "r", Cost: 1},
						}
						ok, err := s.Decide(ctx, now, hits, out)
						if err != nil {
							errs <- err
							return
						}
						if ok {
							admitted.Add(1)
							perAdmitted[c].Add(1)
						}
						if ok != (out[0].Allowed && out[1].Allowed && out[2].Allowed) {
							errs <- fmt.Errorf("request %d: allowed %v but decisions %+v", i, ok, out)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := admitted.Load(); got != 40 {
				t.Errorf("%d admitted, want exactly the shared limit 40", got)
			}
			used := func(l *ratelimit.Limit, key string) int64 {
				u, err := s.Usage(ctx, now, l, key)
				if err != nil {
					t.Fatal(err)
				}
				return u[0].Used
			}
			if u := used(shared, "all"); u != admitted.Load() {
				t.Errorf("shared counter %d, admitted %d", u, admitted.Load())
			}
			if u := used(route, "r"); u != admitted.Load() {
				t.Errorf("route counter %d, admitted %d (a denied request was counted)", u, admitted.Load())
			}
			for c := range clients {
				n := perAdmitted[c].Load()
				if n > 5 {
					t.Errorf("client %d: %d admitted, limit 5", c, n)
				}
				if u := used(perClient, fmt.Sprintf("c%d", c)); u != n {
					t.Errorf("client %d: counter %d, admitted %d", c, u, n)
				}
			}
		})
	}
}
