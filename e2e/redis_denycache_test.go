package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// denyCacheBound is the documented bound (docs/stores.md) on how long a
// gateway answers a denial from its Redis deny cache (1 s), plus a margin
// for a loaded machine. It bounds staleness, not speed.
const denyCacheBound = 3 * time.Second

// denyBody is one enforced limit of 2 per hour on route /d, in mode.
func denyBody(mode string) string {
	return "[[limits]]\nname = \"d\"\nrates = [\"2/hour\"]\nalgorithm = \"fixed_window\"\nby = [\"client\"]\nmode = \"" + mode + "\"\n\n" +
		routeTOML("r", "/d", "d")
}

// TestRedisDenyCacheForgetsOnReload: a client exhausted on Redis, then the
// limit switched to shadow by SIGHUP: the very next request passes. Before,
// the gateway's deny cache kept answering 429 until the cached Retry-After
// (an hour here) ended.
func TestRedisDenyCacheForgetsOnReload(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "500ms", denyBody("enforce"))})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "reload-client"}
	for i, want := range []int{200, 200, 429, 429} {
		if r := get(t, c, g.url("/d"), key); r.Status != want {
			t.Fatalf("request %d: %s, want %d", i, r, want)
		}
	}
	before := readyz(t, g).LastReload.At
	g.rewrite(t, map[string]any{"Body": denyBody("shadow")})
	g.signal(t, syscall.SIGHUP)
	if rd := waitReload(t, g, before); !rd.LastReload.OK {
		t.Fatalf("reload failed: %+v", rd.LastReload)
	}
	if r := get(t, c, g.url("/d"), key); r.Status != 200 {
		t.Fatalf("first request after switching the limit to shadow: %s, want 200", r)
	}
}

// TestRedisDenyCacheForgetsOnLoosen: a client exhausted on Redis under
// 2/hour, then the limit loosened to 10/hour by SIGHUP: the very next
// request passes. Loosening keeps the limit's ID (and its counters), so
// only two things keep the old denial from answering: the gateway purges
// its deny cache on reload, and the cache's key holds the limit's numbers.
// The shadow switch above changes the ID and cannot tell either apart;
// this test fails only when both are gone, and each has a test of its own
// (redisstore's TestDenyCacheKeyHoldsTheNumbers, cmd/gateway's
// TestApplyPurgesDenials).
func TestRedisDenyCacheForgetsOnLoosen(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "500ms", denyBody("enforce"))})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "loosen-client"}
	for i, want := range []int{200, 200, 429, 429} {
		if r := get(t, c, g.url("/d"), key); r.Status != want {
			t.Fatalf("request %d: %s, want %d", i, r, want)
		}
	}
	before := readyz(t, g).LastReload.At
	g.rewrite(t, map[string]any{"Body": strings.Replace(denyBody("enforce"), `"2/hour"`, `"10/hour"`, 1)})
	g.signal(t, syscall.SIGHUP)
	if rd := waitReload(t, g, before); !rd.LastReload.OK {
		t.Fatalf("reload failed: %+v", rd.LastReload)
	}
	if r := get(t, c, g.url("/d"), key); r.Status != 200 {
		t.Fatalf("first request after loosening 2/hour to 10/hour: %s, want 200", r)
	}
}

// TestRedisDenyCacheSeesFleetReset: two gateways on one Redis; a client
// exhausted through B, then reset by DELETE /admin/limits on A: within the
// deny cache's documented bound B admits the client again (before, B
// answered 429 from its cache for the whole Retry-After, an hour here).
func TestRedisDenyCacheSeesFleetReset(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	data := redisData(rs.Addr, nil, "deny", "500ms", denyBody("enforce"))
	a := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	b := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "fleet-client"}
	for i, want := range []int{200, 200, 429, 429} {
		if r := get(t, c, b.url("/d"), key); r.Status != want {
			t.Fatalf("request %d through B: %s, want %d", i, r, want)
		}
	}
	if r := adminDo(t, a, "DELETE", "/admin/limits?limit=d&key=api_key:fleet-client", ""); r.Status != 200 {
		t.Fatalf("DELETE /admin/limits on A: %s", r)
	}
	reset := time.Now()
	for {
		r := get(t, c, b.url("/d"), key)
		if r.Status == 200 {
			break
		}
		if time.Since(reset) > denyCacheBound {
			t.Fatalf("B still answers %s %v after the reset on A (bound %v)", r, time.Since(reset), denyCacheBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisDenyCacheReportsOnlyWhatDenies: a request denied by an enforced
// limit and answered from the deny cache after a shadow limit's own denial
// has lapsed does not count as a shadow denial. Shadow limit s (1 per
// second, sliding log) and enforced d (2 per hour) on one route: request 1
// counts on both; request 2, 0.6 s later, is denied by d while s would deny
// for 0.4 s more (both seen in the metrics); request 3, 0.6 s after that,
// comes from the deny cache, where s is no longer exceeded.
func TestRedisDenyCacheReportsOnlyWhatDenies(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := "[[limits]]\nname = \"s\"\nrates = [\"1/s\"]\nalgorithm = \"sliding_window_log\"\nby = [\"client\"]\nmode = \"shadow\"\n\n" +
		"[[limits]]\nname = \"d\"\nrates = [\"1/hour\"]\nalgorithm = \"fixed_window\"\nby = [\"client\"]\n\n" +
		routeTOML("r", "/d", "s", "d")
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "500ms", body)})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "report-client"}
	shadowDenied := func() float64 {
		var n float64
		for _, v := range scrape(t, g, "").family("tollgate_decisions_total", `tollgate_limit="s"`, `tollgate_decision="denied"`) {
			n += v
		}
		return n
	}
	start := time.Now()
	if r := get(t, c, g.url("/d"), key); r.Status != 200 {
		t.Fatalf("request 1: %s, want 200", r)
	}
	time.Sleep(600 * time.Millisecond)
	if r := get(t, c, g.url("/d"), key); r.Status != 429 {
		t.Fatalf("request 2: %s, want 429", r)
	}
	if time.Since(start) > 950*time.Millisecond {
		t.Skipf("request 2 came %v after request 1, past the shadow limit's window on this loaded machine", time.Since(start))
	}
	if n := shadowDenied(); n != 1 {
		t.Fatalf("after request 2 the shadow limit counted %v denials, want 1", n)
	}
	time.Sleep(600 * time.Millisecond)
	if r := get(t, c, g.url("/d"), key); r.Status != 429 {
		t.Fatalf("request 3: %s, want 429", r)
	}
	if n := shadowDenied(); n != 1 {
		t.Errorf("shadow limit s counted %v denials; want 1 (request 3 came after its window passed)", n)
	}
}
