package e2e

import (
	"fmt"
	"testing"
	"time"
)

// checkOwnAnswer checks the headers every answer the gateway writes itself
// carries: the problem type, Cache-Control: no-store (a cache between the
// client and the gateway must not serve one client's 429 to another) and
// X-Content-Type-Options: nosniff (a browser must not render the body as
// anything but JSON).
func checkOwnAnswer(t *testing.T, what string, r *response, status int) {
	t.Helper()
	r.problem(t, status)
	if got := r.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("%s (%d): Cache-Control %q, want no-store", what, status, got)
	}
	if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s (%d): X-Content-Type-Options %q, want nosniff", what, status, got)
	}
}

// TestOwnAnswersNotCachedNotSniffed: 404, 429, 400, 401, 502, 504 and 503
// written by the gateway (not relayed from an upstream) carry no-store and
// nosniff.
func TestOwnAnswersNotCachedNotSniffed(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	extra := fmt.Sprintf(`
[[limits]]
name = "costly"
rates = ["100/minute"]
cost_header = "X-Cost"

[[limits]]
name = "keyed"
rates = ["100/minute"]
by = ["api_key"]
on_missing = "reject"

[[routes]]
name = "costly"
path_prefix = "/costly"
respond = { status = 200, body = "ok" }
limits = ["costly"]

[[routes]]
name = "keyed"
path_prefix = "/keyed"
respond = { status = 200, body = "ok" }
limits = ["keyed"]

[[routes]]
name = "slow"
path_prefix = "/slow"
upstream = %q
timeout = "200ms"
`, up.URL)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", extra)})
	c := newClient(t, "")

	checkOwnAnswer(t, "no route", get(t, c, g.url("/nowhere"), nil), 404)
	key := map[string]string{"X-API-Key": "k"}
	for i := 0; i < 3; i++ {
		if r := get(t, c, g.url("/api"), key); r.Status != 200 {
			t.Fatalf("request %d: %s", i+1, r)
		}
	}
	checkOwnAnswer(t, "limited", get(t, c, g.url("/api"), key), 429)
	checkOwnAnswer(t, "bad cost", get(t, c, g.url("/costly"), map[string]string{"X-Cost": "lots"}), 400)
	checkOwnAnswer(t, "on_missing reject", get(t, c, g.url("/keyed"), nil), 401)
	checkOwnAnswer(t, "upstream down", get(t, c, g.url("/broken"), nil), 502)
	checkOwnAnswer(t, "upstream late", get(t, c, g.url("/slow"), map[string]string{hSleep: "3s"}), 504)

	// A 401 is its own outcome, not a malformed request.
	unauthorized := `http_server_request_duration_seconds_count{http_request_method="GET",http_route="keyed",tollgate_outcome="unauthorized"}`
	badRequest := `http_server_request_duration_seconds_count{http_request_method="GET",http_route="costly",tollgate_outcome="bad_request"}`
	var m metrics
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m = scrape(t, g, "")
		if m["http_server_active_requests"] == 0 || time.Now().After(deadline) {
			break
		}
	}
	if m[unauthorized] != 1 || m[badRequest] != 1 {
		t.Errorf("want one unauthorized request on keyed and one bad_request on costly:%s", m.family("http_server_request_duration_seconds_count"))
	}

	// 503: the store is down and on_error = "deny".
	body := limitTOML("per-client", "100/minute", "fixed_window", "client") +
		"[[routes]]\nname = \"api\"\npath_prefix = \"/\"\nrespond = { status = 200, body = \"ok\" }\nlimits = [\"per-client\"]\n"
	g2 := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(freePort(t), nil, "deny", "100ms", body)})
	checkOwnAnswer(t, "store down", get(t, c, g2.url("/x"), nil), 503)
}
