package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// dashboardQueries returns every PromQL expression of the Grafana
// dashboard shipped in deploy/grafana, panels nested in rows included.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleDir(t), "deploy", "grafana", "tollgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	type panel struct {
		Title   string                  `json:"title"`
		Targets []struct{ Expr string } `json:"targets"`
		Panels  []json.RawMessage       `json:"panels"`
	}
	var out []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("panel: %v", err)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q has a target without an expression", p.Title)
				}
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// moduleDir is the repository root (the e2e package's parent).
func moduleDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

var (
	promMetric   = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promGrouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// TestGrafanaDashboardMetrics: every metric and label the shipped Grafana
// dashboard queries is one the gateway exports. A gateway on Redis gets
// traffic that makes every family appear (allowed, limited and near-limit
// decisions, an upstream exchange, a client-IP fallback, a reload, a store
// timeout), then /metrics is scraped and each expression's metric names
// and label names are looked up in it; the dashboard must also cover the
// figures operators look at first.
func TestGrafanaDashboardMetrics(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	up := newUpstream(t)
	body := `trusted_proxies = ["127.0.0.1/32"]

` + limitTOML("dash", "3/hour", "fixed_window", "client") + routeTOML("limited", "/limited", "dash") +
		fmt.Sprintf("[[routes]]\nname = \"proxied\"\npath_prefix = \"/up\"\nupstream = %q\n", up.URL)
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "100ms", body)})
	c := newClient(t, "")
	for i, want := range []int{200, 200, 200, 429} {
		if r := get(t, c, g.url("/limited"), map[string]string{"X-API-Key": "dash"}); r.Status != want {
			t.Fatalf("request %d: %s, want %d", i, r, want)
		}
	}
	if r := get(t, c, g.url("/up/x"), nil); r.Status != 200 {
		t.Fatalf("proxied request: %s", r)
	}
	// A trusted proxy's X-Forwarded-For without an address: the client
	// is the peer's IP (counted as a fallback).
	if r := get(t, c, g.url("/limited"), map[string]string{"X-Forwarded-For": "not-an-address"}); r.Status != 200 {
		t.Fatalf("request with a bad X-Forwarded-For: %s", r)
	}
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("reload: %s", r)
	}
	rs.Pause()
	r := get(t, c, g.url("/limited"), map[string]string{"X-API-Key": "other"})
	rs.Resume()
	if r.Status != 503 {
		t.Fatalf("request to a hung Redis: %s, want 503", r)
	}

	m := scrape(t, g, "")
	labels := map[string]map[string]bool{} // metric → its label names
	for series := range m {
		name, rest, _ := strings.Cut(series, "{")
		if labels[name] == nil {
			labels[name] = map[string]bool{}
		}
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				labels[name][k] = true
			}
		}
	}
	// Labels Prometheus adds at scrape time.
	scrapeLabels := map[string]bool{"job": true, "instance": true}

	used := map[string]bool{}
	for _, expr := range dashboardQueries(t) {
		var names []string
		for _, mm := range promMetric.FindAllStringSubmatch(expr, -1) {
			name := mm[1]
			names = append(names, name)
			used[name] = true
			ls, ok := labels[name]
			if !ok {
				t.Errorf("the dashboard queries %s, which the gateway does not export (expression %q)", name, expr)
				continue
			}
			for _, lm := range promMatcher.FindAllStringSubmatch(mm[2], -1) {
				if !ls[lm[1]] && !scrapeLabels[lm[1]] {
					t.Errorf("%s has no label %s (expression %q)", name, lm[1], expr)
				}
			}
		}
		if len(names) == 0 {
			t.Errorf("expression %q names no metric with a selector", expr)
		}
		for _, gm := range promGrouping.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(gm[1], ",") {
				l = strings.TrimSpace(l)
				found := scrapeLabels[l]
				for _, n := range names {
					found = found || labels[n][l]
				}
				if !found {
					t.Errorf("expression %q groups by %s, a label none of %v has", expr, l, names)
				}
			}
		}
	}
	for _, want := range []string{
		"http_server_request_duration_seconds_count", // requests by outcome
		"tollgate_decisions_total",                   // decisions by limit
		"tollgate_near_limit_total",
		"tollgate_store_duration_seconds_bucket", // store latency
		"tollgate_store_errors_total",
		"tollgate_config_reloads_total",
	} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}
