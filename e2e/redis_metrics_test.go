package e2e

import (
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisStoreMetrics: /metrics exports the Redis store's own figures
// (breaker state, calls, deny-cache hits, refunds, releases pending, held
// slots, clock skew), and a call that outlives store.timeout on a hung
// Redis is counted with error_type="timeout", not "store".
func TestRedisStoreMetrics(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("one", "1/hour", "fixed_window", "client") + routeTOML("r", "/m", "one")
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "100ms", body)})
	c := newClient(t, "")
	for i, want := range []int{200, 429, 429, 429} {
		if r := get(t, c, g.url("/m"), map[string]string{"X-API-Key": "metrics-client"}); r.Status != want {
			t.Fatalf("request %d: %s, want %d", i, r, want)
		}
	}
	rs.Pause()
	r := get(t, c, g.url("/m"), map[string]string{"X-API-Key": "metrics-other"})
	rs.Resume()
	if r.Status != 503 {
		t.Fatalf("request to a hung Redis: %s, want 503 (on_error = deny)", r)
	}
	m := scrape(t, g, "")
	errs := m.family("tollgate_store_errors_total")
	if len(m.family("tollgate_store_errors_total", `error_type="timeout"`)) != 1 || len(errs) != 1 {
		t.Errorf("store errors %v, want one series, error_type=\"timeout\"", errs)
	}
	for _, tc := range []struct {
		name string
		min  float64
	}{
		{"tollgate_store_breaker_state", 0},
		{"tollgate_store_calls_total", 3},
		{"tollgate_store_deny_cache_hits_total", 2},
		{"tollgate_store_refunds_total", 0},
		{"tollgate_store_releases_pending", 0},
		{"tollgate_store_releases_dropped_total", 0},
		{"tollgate_store_slots_held", 0},
		{"tollgate_store_canceled_total", 0},
		{"tollgate_store_clock_skew_seconds", -1},
	} {
		f := m.family(tc.name)
		if len(f) != 1 {
			t.Errorf("%s: %v, want one series", tc.name, f)
			continue
		}
		for k, v := range f {
			if v < tc.min {
				t.Errorf("%s = %v, want ≥ %v", k, v, tc.min)
			}
		}
	}
}
