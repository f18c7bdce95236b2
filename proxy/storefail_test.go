package proxy_test

import (
	"context"
	"fmt"

	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// failingStore is a store whose backend is down: every call fails as a
// real store does when its deadline passes.
type failingStore struct{ calls atomic.Int64 }

func (f *failingStore) Decide(ctx context.Context, _ time.Time, _ []ratelimit.Hit, _ []ratelimit.Decision) (bool, error) {
	f.calls.Add(1)
	return false, fmt.Errorf("%w: connection refused", ratelimit.ErrStore)
}

func (f *failingStore) Release(context.Context, []ratelimit.Hit, []ratelimit.Decision) error {
	return fmt.Errorf("%w: connection refused", ratelimit.ErrStore)
}

func (f *failingStore) Usage(context.Context, time.Time, *ratelimit.Limit, string) ([]ratelimit.WindowUsage, error) {
	return nil, ratelimit.ErrStore
}

func (f *failingStore) Reset(context.Context, *ratelimit.Limit, string) error {
	return ratelimit.ErrStore
}

func (f *failingStore) Close() error { return nil }

func TestStoreFailurePolicies(t *testing.T) {
	for _, tc := range []struct {
		onError    string
		wantStatus []int // for requests 1..3 with a limit of 2
		wantHeader bool  // rate-limit headers on the first response
	}{
		{"local", []int{200, 200, 429}, true},
		{"allow", []int{200, 200, 200}, false},
		{"deny", []int{503, 503, 503}, false},
	} {
		t.Run(tc.onError, func(t *testing.T) {
			up := newUpstream(t, nil)
			p := compile(t, func(c *config.Config) {
				c.Store.OnError = tc.onError
				c.Limits = []config.LimitConfig{limit("api", "sliding_window_log", "2/minute")}
				c.Routes = []config.RouteConfig{route("api", "/", up.URL, "api")}
			})
			fs := &failingStore{}
			h, err := proxy.New(p, proxy.Options{Store: fs, Local: memstore.New(memstore.Options{})})
			if err != nil {
				t.Fatal(err)
			}
			gw := gateway(t, h)
			for i, want := range tc.wantStatus {
				resp := get(t, gw.URL+"/x")
				if resp.StatusCode != want {
					t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
				}
				if i == 0 && (resp.Header.Get("RateLimit") != "") != tc.wantHeader {
					t.Errorf("RateLimit header %q, want present=%v", resp.Header.Get("RateLimit"), tc.wantHeader)
				}
				if want == 503 && resp.Header.Get("Retry-After") == "" {
					t.Errorf("503 without Retry-After")
				}
			}
			if fs.calls.Load() != int64(len(tc.wantStatus)) {
				t.Errorf("store called %d times, want %d", fs.calls.Load(), len(tc.wantStatus))
			}
		})
	}
}
