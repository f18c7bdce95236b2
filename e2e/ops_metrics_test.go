package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOpsMetricsCount: after a known sequence of requests and
// reloads, /metrics holds exactly the expected counts — requests by route,
// method and outcome (forwarded, limited, shadow_limited, no_route,
// upstream_error), decisions by limit, decision and mode, near-limit
// decisions by limit, store calls, upstream exchanges, config reloads by
// result — and no series for anything that did not happen.
func TestOpsMetricsCount(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up)})
	c := newClient(t, "")

	// per-key is 3/minute: 3 forwarded, then limited. The third allowed
	// decision leaves 0 of 3: near the limit.
	for i := 0; i < 3; i++ {
		expect(t, c, g.url("/api/x"), 200, "")
	}
	get(t, c, g.url("/api/x"), nil).problem(t, 429)
	// The shadow candidate is 2/minute: 2 forwarded (the second near the
	// limit), then forwarded although it would have denied.
	for i := 0; i < 3; i++ {
		r := get(t, c, g.url("/shadow"), map[string]string{"X-API-Key": "shadow-client"})
		if r.Status != 200 {
			t.Fatalf("shadow request %d: %s", i+1, r)
		}
	}
	get(t, c, g.url("/nowhere"), nil).problem(t, 404)
	get(t, c, g.url("/broken"), nil).problem(t, 502)

	// One good reload and one bad one.
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload of the unchanged file: %s", r)
	}
	g.rewrite(t, map[string]any{"Rate": "3/fortnight"})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 422 {
		t.Fatalf("POST /admin/reload of an invalid file: %s, want 422", r)
	}

	// The in-flight gauge drops after the response is written: wait for it.
	var m metrics
	deadline := time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, g, "")
		if m["http_server_active_requests"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("http_server_active_requests never went back to 0:%s", m.family("http_server_active_requests"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	checkFamily(t, m, "http_server_request_duration_seconds_count", map[string]float64{
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="api",tollgate_outcome="forwarded"}`:         3,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="api",tollgate_outcome="limited"}`:           1,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="shadow",tollgate_outcome="forwarded"}`:      2,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="shadow",tollgate_outcome="shadow_limited"}`: 1,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="",tollgate_outcome="no_route"}`:             1,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="broken",tollgate_outcome="upstream_error"}`: 1,
	})
	checkFamily(t, m, "tollgate_decisions_total", map[string]float64{
		`tollgate_decisions_total{tollgate_decision="allowed",tollgate_limit="per-key",tollgate_mode="enforce"}`:  3,
		`tollgate_decisions_total{tollgate_decision="denied",tollgate_limit="per-key",tollgate_mode="enforce"}`:   1,
		`tollgate_decisions_total{tollgate_decision="allowed",tollgate_limit="candidate",tollgate_mode="shadow"}`: 2,
		`tollgate_decisions_total{tollgate_decision="denied",tollgate_limit="candidate",tollgate_mode="shadow"}`:  1,
	})
	checkFamily(t, m, "tollgate_near_limit_total", map[string]float64{
		`tollgate_near_limit_total{tollgate_limit="per-key"}`:   1,
		`tollgate_near_limit_total{tollgate_limit="candidate"}`: 1,
	})
	checkFamily(t, m, "tollgate_config_reloads_total", map[string]float64{
		`tollgate_config_reloads_total{tollgate_result="success"}`: 1,
		`tollgate_config_reloads_total{tollgate_result="failure"}`: 1,
	})
	// Seven requests reached a limit (counted in tollgate_decisions_total
	// above); none failed. The memory store never blocks, so its calls
	// are not timed: the store latency histogram belongs to Redis.
	checkFamily(t, m, "tollgate_store_duration_seconds_count", map[string]float64{})
	checkFamily(t, m, "tollgate_store_errors_total", map[string]float64{})
	// Three exchanges with the api upstream (the limited request never
	// left); the closed port of "broken" is one more, failed, exchange.
	if n := m[`tollgate_upstream_duration_seconds_count{http_route="api"}`]; n != 3 {
		t.Errorf("upstream exchanges of route api = %v, want 3:%s", n, m.family("tollgate_upstream_duration_seconds_count"))
	}
	if len(m.family("tollgate_store_memory_keys")) != 1 {
		t.Errorf("no live-keys gauge:%s", m.family("tollgate_store_memory_keys"))
	}
	// No label carries a client identity.
	for k := range m {
		if strings.Contains(k, "shadow-client") || strings.Contains(k, "127.0.0.1") {
			t.Errorf("series %s carries a client identity", k)
		}
	}
}

// TestOpsRuntimeMetrics: /metrics carries the Go runtime's and the
// process's metrics under the names Prometheus users know, with plausible
// values, behind the same admin token as the gateway's own metrics.
func TestOpsRuntimeMetrics(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	const token = "runtime-metrics-token"
	before := time.Now()
	g := startGateway(t, "ops.toml.tmpl", gwOpts{
		Data: opsData(t, up, "TokenEnv", "OPS_ADMIN_TOKEN"),
		Env:  []string{"OPS_ADMIN_TOKEN=" + token},
	})
	if r := adminDo(t, g, "GET", "/metrics", ""); r.Status != http.StatusUnauthorized || strings.Contains(string(r.Body), "go_") {
		t.Fatalf("GET /metrics without the token: %s, want 401 and no metrics", r)
	}
	m := scrape(t, g, token)

	positive := []string{
		"go_goroutines", // at least main and the listeners' goroutines
		"go_threads",
		"go_memstats_alloc_bytes",
		"go_memstats_heap_inuse_bytes",
		"go_memstats_sys_bytes",
		"go_sched_gomaxprocs_threads",
		"process_resident_memory_bytes",
		"process_virtual_memory_bytes",
		"process_open_fds", // the listeners at least
		"process_max_fds",
	}
	for _, name := range positive {
		if v, ok := m[name]; !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want > 0", name, v, ok)
		}
	}
	if v, ok := m["process_cpu_seconds_total"]; !ok || v < 0 {
		t.Errorf("process_cpu_seconds_total = %v (present %v), want >= 0", v, ok)
	}
	if v := m["process_open_fds"]; v > m["process_max_fds"] {
		t.Errorf("process_open_fds %v above process_max_fds %v", v, m["process_max_fds"])
	}
	if rss, vsz := m["process_resident_memory_bytes"], m["process_virtual_memory_bytes"]; rss > vsz {
		t.Errorf("resident memory %v above virtual memory %v", rss, vsz)
	}
	// The gateway started after this test read the clock and before the
	// scrape; /proc gives the start to the clock tick and boot time to the
	// second, hence the second of slack before.
	start := m["process_start_time_seconds"]
	if lo, hi := float64(before.Unix()-2), float64(time.Now().Unix()+1); start < lo || start > hi {
		t.Errorf("process_start_time_seconds %v outside [%v, %v]", start, lo, hi)
	}
	if len(m.family("go_info", `version="go`)) != 1 {
		t.Errorf("no go_info with the Go version:%s", m.family("go_info"))
	}
	if len(m.family("go_gc_duration_seconds", `quantile="`)) == 0 {
		t.Errorf("no go_gc_duration_seconds summary:%s", m.family("go_gc_duration_seconds"))
	}
	// The gateway's own metrics are still there, from the same registry.
	if len(m.family("target_info")) != 1 {
		t.Errorf("target_info missing beside the runtime metrics")
	}
}
