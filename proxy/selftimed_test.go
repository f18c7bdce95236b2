package proxy_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// deadlineStore is a memory store that records whether each decision
// arrived with a deadline, as a blocking store (it does not claim
// NonBlocking).
type deadlineStore struct {
	*memstore.Store
	calls, withDeadline atomic.Int64
}

func (d *deadlineStore) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	d.calls.Add(1)
	if _, ok := ctx.Deadline(); ok {
		d.withDeadline.Add(1)
	}
	return d.Store.Decide(ctx, now, hits, out)
}

// NonBlocking hides the memory store's promise: this store blocks.
func (d *deadlineStore) NonBlocking() bool { return false }

// selfTimedStore bounds its own calls by budget.
type selfTimedStore struct {
	*deadlineStore
	budget time.Duration
}

func (s *selfTimedStore) CallTimeout() time.Duration { return s.budget }

// TestSelfTimedStoreDeadline: the handler sets a decision's deadline for a
// blocking store, except for one that bounds its calls by a budget within
// store.timeout (the Redis store), which would make the timer redundant.
func TestSelfTimedStoreDeadline(t *testing.T) {
	for _, tc := range []struct {
		name         string
		budget       time.Duration // 0: not a SelfTimed store
		wantDeadline bool
	}{
		{"blocking", 0, true},
		{"self-timed within store.timeout", 50 * time.Millisecond, false},
		{"self-timed shorter", 10 * time.Millisecond, false},
		{"self-timed longer than store.timeout", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			p := compile(t, func(c *config.Config) {
				c.Store.Timeout = "50ms"
				c.Limits = []config.LimitConfig{limit("api", "fixed_window", "100/minute")}
				c.Routes = []config.RouteConfig{route("api", "/", up.URL, "api")}
			})
			ds := &deadlineStore{Store: memstore.New(memstore.Options{})}
			var store ratelimit.Store = ds
			if tc.budget > 0 {
				store = &selfTimedStore{deadlineStore: ds, budget: tc.budget}
			}
			h, err := proxy.New(p, proxy.Options{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			gw := gateway(t, h)
			for range 3 {
				if resp := get(t, gw.URL+"/x"); resp.StatusCode != 200 {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
			}
			want := int64(0)
			if tc.wantDeadline {
				want = 3
			}
			if ds.calls.Load() != 3 || ds.withDeadline.Load() != want {
				t.Errorf("%d of %d decisions had a deadline, want %d of 3", ds.withDeadline.Load(), ds.calls.Load(), want)
			}
		})
	}
}
