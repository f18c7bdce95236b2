package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// batchedTOML is a shared (by = []) limit with sync = "batched".
func batchedTOML(name, rate, alg string, lease int) string {
	return fmt.Sprintf("[[limits]]\nname = %q\nrates = [%q]\nalgorithm = %q\nby = []\nsync = \"batched\"\nsync_interval = \"1s\"\nlease_size = %d\n\n",
		name, rate, alg, lease)
}

// evalCalls is the number of script calls (EVALSHA, EVAL, FCALL) Redis
// has run, from INFO commandstats.
func evalCalls(t *testing.T, rs *redistest.Server) int64 {
	t.Helper()
	var n int64
	for _, cmd := range []string{"evalsha", "eval", "fcall", "evalsha_ro", "fcall_ro"} {
		v := rs.Info("commandstats", "cmdstat_"+cmd)
		if v == "" {
			continue
		}
		c, err := strconv.ParseInt(strings.TrimPrefix(strings.Split(v, ",")[0], "calls="), 10, 64)
		if err != nil {
			t.Fatalf("commandstats %s: %q", cmd, v)
		}
		n += c
	}
	return n
}

// TestHybridFleet: three gateway processes share one redis-server and a
// hot shared key of 200 per 10 s, batched with leases of at most 20. A
// burst of 1,200 requests spread over the three admits, for the fixed
// window, at most 200 (the documented overshoot is 0) and, for the
// sliding counter, at most 200 + N·(k−1) = 257; neither strands more than
// N·(k−1) = 57; and Redis runs a small fraction of a script call per
// request (leases, and one denial per gateway per interval).
func TestHybridFleet(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	const (
		n, limit, lease, gateways = 1200, 200, 20, 3
		bound                     = gateways * (lease - 1)
	)
	body := batchedTOML("hot-fw", "200/10s", "fixed_window", lease) + routeTOML("fw", "/fw", "hot-fw") +
		batchedTOML("hot-swc", "200/10s", "sliding_window_counter", lease) + routeTOML("swc", "/swc", "hot-swc")
	data := redisData(rs.Addr, nil, "deny", "10s", body)
	var urls [2][]string
	var gws []*gw
	for range gateways {
		g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
		gws = append(gws, g)
		urls[0] = append(urls[0], g.url("/fw"))
		urls[1] = append(urls[1], g.url("/swc"))
	}
	for i, tc := range []struct {
		alg      string
		max, min int
	}{
		{"fixed_window", limit, limit - bound},
		{"sliding_window_counter", limit + bound, limit - bound},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			avoidWindowEdge(10 * time.Second)
			defer checkLeaseMetrics(t, gws)
			before := evalCalls(t, rs)
			res := burst(n, urls[i], nil)
			calls := evalCalls(t, rs) - before
			if len(res.errs) > 0 {
				t.Fatalf("%d requests failed; first: %v", len(res.errs), res.errs[0])
			}
			ok := res.got[200]
			t.Logf("%s: %d of %d admitted over %d gateways (limit %d, bound +%d), %d script calls (%.3f per request)",
				tc.alg, ok, n, gateways, limit, bound, calls, float64(calls)/n)
			if ok > tc.max || ok < tc.min || res.got[429] != n-ok {
				t.Errorf("statuses %s: want between %d and %d admitted, the rest 429", res.got, tc.min, tc.max)
			}
			if res.badRA > 0 {
				t.Errorf("%d denials without a Retry-After ≥ 1", res.badRA)
			}
			// Exact counting costs a call per request; leases of up to 20
			// (doubling from 1) and cached denials a small fraction.
			if calls > n/10 {
				t.Errorf("%d script calls for %d requests", calls, n)
			}

		})
	}
}

// checkLeaseMetrics fails t unless the gateways' /metrics report leases
// taken and decisions made without a call.
func checkLeaseMetrics(t *testing.T, gws []*gw) {
	t.Helper()
	var leases, local float64
	for _, g := range gws {
		m := scrape(t, g, "")
		for _, v := range m.family("tollgate_store_leases_total") {
			leases += v
		}
		for _, v := range m.family("tollgate_store_local_decisions_total") {
			local += v
		}
	}
	if leases == 0 || local == 0 {
		t.Errorf("metrics: %v leases, %v local decisions over the fleet; want both > 0", leases, local)
	}
}

// TestHybridMemoryExact: with the memory store a batched limit is decided
// exactly: one gateway admits exactly its limit of a burst.
func TestHybridMemoryExact(t *testing.T) {
	t.Parallel()
	body := batchedTOML("hot-fw", "200/10s", "fixed_window", 20) + routeTOML("fw", "/fw", "hot-fw") +
		batchedTOML("hot-swc", "200/10s", "sliding_window_counter", 20) + routeTOML("swc", "/swc", "hot-swc")
	g := startGateway(t, "budget.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Redis": ""}})
	for _, path := range []string{"/fw", "/swc"} {
		avoidWindowEdge(10 * time.Second)
		burst(600, []string{g.url(path)}, nil).check(t, 600, 200)
	}
}

// TestRedisCoalescing: through the binary, 300 concurrent requests of
// distinct clients are decided exactly with coalescing (the default) and
// without it, and /metrics shows decide calls sent in pipelines only
// when it is on.
func TestRedisCoalescing(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("pc", "1/hour", "fixed_window", "client") + routeTOML("r", "/c", "pc")
	for _, tc := range []struct {
		name string
		env  []string
		on   bool
	}{
		{"default", nil, true},
		{"off", []string{"TOLLGATE_STORE_REDIS_COALESCE=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := redisData(rs.Addr, nil, "deny", "10s", body)
			data["Prefix"] = "co-" + tc.name + ":"
			g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, Env: tc.env})
			key := func(i int) map[string]string { return map[string]string{"X-API-Key": fmt.Sprintf("co-%d", i%150)} }
			// 150 clients, two requests each, all at once: exactly one
			// of each client's two is admitted.
			burst(300, []string{g.url("/c")}, key).check(t, 300, 150)
			m := scrape(t, g, "")
			var coalesced float64
			for _, v := range m.family("tollgate_store_coalesced_total") {
				coalesced = v
			}
			if tc.on != (coalesced > 0) {
				t.Errorf("tollgate_store_coalesced_total = %v with coalescing %s", coalesced, tc.name)
			}
			t.Logf("%s: %v of 300 decisions coalesced", tc.name, coalesced)
		})
	}
}
