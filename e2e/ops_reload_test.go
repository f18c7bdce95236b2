package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpsReloadUnderLoad: reloads by POST
// /admin/reload and by SIGHUP, alternating, under four concurrent clients
// fail no request; every reload lands (metrics count them); a limit whose
// definition did not change keeps its counters across all of them.
func TestOpsReloadUnderLoad(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	data := func(body string) map[string]any {
		return map[string]any{"Rate": "1000000/minute", "Body": body}
	}
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Rate", "1000000/minute")})
	c := newClient(t, "")
	sticky := map[string]string{"X-API-Key": "sticky-client"}
	for i := 0; i < 3; i++ {
		expect2(t, c, g.url("/sticky"), sticky, 200)
	}

	load := startLoadLoop(c, 4, func(i int) (string, func(*response) bool) {
		if i%2 == 1 {
			return g.url("/shadow"), func(r *response) bool { return r.Status == 200 && strings.HasPrefix(string(r.Body), "v") }
		}
		return g.url("/api/load"), func(r *response) bool { return r.Status == 200 && r.Header.Get("X-Upstream") == "echo" }
	})
	const reloads = 10
	for i := 0; i < reloads; i++ {
		before := readyz(t, g).LastReload.At
		g.rewrite(t, data(fmt.Sprintf("v%d", i)))
		if i%2 == 0 {
			if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
				t.Fatalf("POST /admin/reload %d: %s", i, r)
			}
		} else {
			g.signal(t, syscall.SIGHUP)
		}
		if rd := waitReload(t, g, before); !rd.LastReload.OK {
			t.Fatalf("reload %d failed: %+v", i, rd.LastReload)
		}
		waitBody(t, c, g.url("/shadow"), fmt.Sprintf("v%d", i))
		time.Sleep(50 * time.Millisecond) // let the load run on the new config
	}
	total, failures := load.stop()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during %d reloads; first: %s", len(failures), total, reloads, failures[0])
	}
	if total < 50 {
		t.Errorf("only %d requests were made during the reloads", total)
	}
	t.Logf("%d requests during %d reloads, %d failed", total, reloads, len(failures))

	m := scrape(t, g, "")
	checkFamily(t, m, "tollgate_config_reloads_total", map[string]float64{
		`tollgate_config_reloads_total{tollgate_result="success"}`: reloads,
	})
	// sticky did not change: its 3 of 5 are still counted.
	if w := limitUsage(t, g, "", "sticky", "api_key:sticky-client").Windows[0]; w.Used != 3 || w.Remaining != 2 {
		t.Errorf("sticky after %d reloads: %+v, want used 3, remaining 2", reloads, w)
	}
	expect2(t, c, g.url("/sticky"), sticky, 200)
	expect2(t, c, g.url("/sticky"), sticky, 200)
	get(t, c, g.url("/sticky"), sticky).problem(t, 429)
}

// expect2 sends a GET with headers and checks the status.
func expect2(t *testing.T, c *http.Client, url string, hdr map[string]string, status int) {
	t.Helper()
	if r := get(t, c, url, hdr); r.Status != status {
		t.Fatalf("GET %s %v: %s, want %d", url, hdr, r, status)
	}
}

// TestOpsBadReload: a configuration with
// several problems is rejected by POST /admin/reload with 422; every
// problem is logged with its field path and shown in /readyz's
// last_reload (ok false), which makes the gateway no less ready; the old
// configuration keeps serving with its counters; the reload failure is
// counted; the next good file is taken.
func TestOpsBadReload(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up)})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "bad-reload"}
	expect2(t, c, g.url("/api"), key, 200)

	before := readyz(t, g).LastReload.At
	g.rewrite(t, map[string]any{"Rate": "3/fortnight", "Body": "v2", "Extra": `
[[routes]]
name = "extra"
path_prefix = "/extra"
upstream = "127.0.0.1:1"
limits = ["serch"]
`})
	r := adminDo(t, g, "POST", "/admin/reload", "")
	if r.Status != 422 {
		t.Fatalf("POST /admin/reload of an invalid file: %s, want 422", r)
	}
	problems := []string{"limits[0].rates[0]", "routes[4].limits[0]", "serch", "routes[4].upstream"}
	for _, p := range problems {
		if !strings.Contains(string(r.Body), p) {
			t.Errorf("the 422 body does not name %s: %s", p, r.Body)
		}
	}
	rd := waitReload(t, g, before)
	if rd.status != 200 || !rd.Ready || rd.LastReload.OK {
		t.Errorf("/readyz after a rejected reload: status %d %+v; want 200, ready, last_reload.ok false", rd.status, rd)
	}
	for _, p := range problems {
		if !strings.Contains(rd.LastReload.Error, p) {
			t.Errorf("/readyz last_reload.error does not name %s: %q", p, rd.LastReload.Error)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := g.output()
		missing := ""
		for _, p := range problems {
			if !strings.Contains(out, p) {
				missing = p
			}
		}
		if missing == "" && strings.Contains(out, "reload rejected") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log does not show the rejected reload with %s", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The old configuration serves, with its counters.
	expect(t, c, g.url("/shadow"), 200, "v1")
	get(t, c, g.url("/extra"), nil).problem(t, 404)
	expect2(t, c, g.url("/api"), key, 200)
	expect2(t, c, g.url("/api"), key, 200)
	get(t, c, g.url("/api"), key).problem(t, 429)
	checkFamily(t, scrape(t, g, ""), "tollgate_config_reloads_total", map[string]float64{
		`tollgate_config_reloads_total{tollgate_result="failure"}`: 1,
	})

	// A good file is taken at the next reload.
	before = rd.LastReload.At
	g.rewrite(t, map[string]any{"Rate": "3/minute", "Body": "v3", "Extra": ""})
	g.signal(t, syscall.SIGHUP)
	if rd := waitReload(t, g, before); !rd.LastReload.OK || rd.LastReload.Error != "" {
		t.Errorf("/readyz after the good reload: %+v", rd.LastReload)
	}
	expect(t, c, g.url("/shadow"), 200, "v3")
	get(t, c, g.url("/api"), key).problem(t, 429) // per-key unchanged: still exhausted
}
