package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisKeyRotationTTLs (on Redis): after a burst of
// 5,000 distinct API keys through limits of every algorithm (concurrency
// included), every key under the store's prefix carries a TTL: none
// answers TTL -1.
func TestRedisKeyRotationTTLs(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	algs := []string{"fixed_window", "fixed_window_elastic", "sliding_window_log", "sliding_window_counter",
		"token_bucket", "gcra"}
	var body string
	var names []string
	for _, a := range algs {
		body += limitTOML("k-"+a, "5/minute", a, "client")
		names = append(names, "k-"+a)
	}
	body += "[[limits]]\nname = \"k-concurrency\"\nalgorithm = \"concurrency\"\nmax_in_flight = 4\nby = [\"client\"]\n\n"
	names = append(names, "k-concurrency")
	body += routeTOML("k", "/k", names...)
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "2s", body)})

	const keys, workers = 5000, 16
	var next atomic.Int64
	var mu sync.Mutex
	got := statuses{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		c := newClient(t, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > keys {
					return
				}
				r, err := tryDo(c, "GET", g.url("/k"), map[string]string{"X-API-Key": fmt.Sprintf("rot-%d", i)}, nil)
				mu.Lock()
				if err != nil {
					got[-1]++
				} else {
					got[r.Status]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got[200] != keys {
		t.Errorf("rotation burst: %s, want %d×200 (every key is new)", got, keys)
	}

	rc := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []string
	iter := rc.Scan(ctx, 0, "tollgate:*", 1000).Iterator()
	for iter.Next(ctx) {
		all = append(all, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	if len(all) < keys {
		t.Fatalf("%d keys under tollgate: after %d distinct clients, want at least %d", len(all), keys, keys)
	}
	pipe := rc.Pipeline()
	ttls := make([]*redis.DurationCmd, len(all))
	for i, k := range all {
		ttls[i] = pipe.TTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatalf("TTL pipeline: %v", err)
	}
	var noTTL []string
	byLimit := map[string]int{}
	for i, c := range ttls {
		if c.Val() == -1 { // go-redis reports TTL -1 as a Duration of -1
			noTTL = append(noTTL, all[i])
		}
		// prefix + hit key ({TAG}HASH, no ':') + ":" + limit ID and
		// whatever the store appends after it.
		_, limitPart, _ := strings.Cut(strings.TrimPrefix(all[i], "tollgate:"), ":")
		byLimit[limitPart]++
	}
	t.Logf("%d keys under tollgate: (%d limit IDs), %d without TTL", len(all), len(byLimit), len(noTTL))
	if len(noTTL) > 0 {
		t.Errorf("%d of %d keys have no TTL (TTL -1), e.g. %q", len(noTTL), len(all), noTTL[:min(5, len(noTTL))])
	}
	// Concurrency keys are deleted when their count returns to 0; every
	// rate limit leaves its keys.
	if len(byLimit) < len(algs) {
		t.Errorf("keys of %d limits, want at least %d (one per rate limit)", len(byLimit), len(algs))
	}
}
