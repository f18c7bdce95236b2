package redisstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestBudgetSlowDial: every connection takes three budgets to dial (a
// distant or TLS Redis). A call without a deadline of its own must give up
// at its budget, not wait for the dial and then write on an expired
// deadline, which fails the call and throws the new connection away, so
// that the next call dials again. Given up on, the dial ends in the pool,
// and the calls after it decide.
func TestBudgetSlowDial(t *testing.T) {
	srv := redistest.Standalone(t)
	const budget = 50 * time.Millisecond
	for _, coalesce := range []bool{false, true} {
		c := redis.NewClient(&redis.Options{
			Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
			PoolSize: 4, PoolTimeout: budget,
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				time.Sleep(3 * budget)
				var d net.Dialer
				return d.DialContext(context.WithoutCancel(ctx), network, addr)
			},
		})
		t.Cleanup(func() { c.Close() })
		s := newStore(t, c, redisstore.Options{Timeout: budget, DenyCacheSize: -1, Coalesce: coalesce, BreakerFailures: 1000})
		l := faultLimit(t)
		hit := []ratelimit.Hit{{Limit: l, Key: "{dial}k", Cost: 1}}
		ok := 0
		for range 20 {
			if _, err := s.Decide(context.Background(), time.Now(), hit, make([]ratelimit.Decision, 1)); err == nil {
				ok++
			}
			time.Sleep(budget)
		}
		// Only the first call or two pay for the dial.
		if ok < 10 {
			t.Errorf("coalesce=%v: %d decisions in 20 calls: dialed connections were spent on expired calls", coalesce, ok)
		}
		t.Logf("coalesce=%v: %d of 20 calls decided", coalesce, ok)
	}
}
