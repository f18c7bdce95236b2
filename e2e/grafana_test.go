package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
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
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")`)
	promGrouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// TestGrafanaDashboardMetrics: every metric, label and label value the
// shipped Grafana dashboard queries is one the gateway exports. A gateway
// on Redis gets traffic that makes every family appear (allowed, limited
// and near-limit decisions, an upstream exchange, a client-IP fallback, a
// successful and a failed reload, a store timeout), then /metrics is
// scraped and each expression's metric names and label names are looked
// up in it, and each label matcher's value is matched against the values
// the label takes (checkMatcher: a negative matcher whose value never
// occurs is a no-op, and an error too); the dashboard must also cover the
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
	// A failed reload (the old configuration stays), so that the reload
	// panels' matchers are checked against both results.
	g.rewrite(t, map[string]any{"Body": strings.Replace(body, "3/hour", "3/fortnight", 1)})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 422 {
		t.Fatalf("reload of an invalid file: %s, want 422", r)
	}
	rs.Pause()
	r := get(t, c, g.url("/limited"), map[string]string{"X-API-Key": "other"})
	rs.Resume()
	if r.Status != 503 {
		t.Fatalf("request to a hung Redis: %s, want 503", r)
	}

	m := scrape(t, g, "")
	// metric → label name → the values it takes in the scrape.
	labels := map[string]map[string]map[string]bool{}
	for series := range m {
		name, ls, err := parseSeries(series)
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		if labels[name] == nil {
			labels[name] = map[string]map[string]bool{}
		}
		for k, v := range ls {
			if labels[name][k] == nil {
				labels[name][k] = map[string]bool{}
			}
			labels[name][k][v] = true
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
			if rest := strings.Trim(promMatcher.ReplaceAllString(mm[2], ""), ", \t\n"); rest != "" {
				t.Errorf("%s: selector {%s} holds %q, which this test cannot read (expression %q)", name, mm[2], rest, expr)
			}
			for _, lm := range promMatcher.FindAllStringSubmatch(mm[2], -1) {
				label, op := lm[1], lm[2]
				if scrapeLabels[label] {
					continue
				}
				values, ok := ls[label]
				if !ok {
					t.Errorf("%s has no label %s (expression %q)", name, label, expr)
					continue
				}
				if err := checkMatcher(op, lm[3], values); err != nil {
					t.Errorf("%s{%s%s%s}: %v (expression %q)", name, label, op, lm[3], err, expr)
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
					found = found || labels[n][l] != nil
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

// checkMatcher checks one label matcher of a dashboard query against the
// values the label takes in a scrape of a gateway that went through every
// case the dashboard shows. Each kind of matcher must match one of them:
// an equality or regex that matches none selects nothing (a panel that
// stays empty), and a negative matcher (!=, !~) whose value never occurs
// excludes nothing (a panel that counts what it meant to leave out). A
// value naming a Grafana variable ($var) is chosen by the viewer and is
// not checked.
func checkMatcher(op, quoted string, values map[string]bool) error {
	want, err := strconv.Unquote(quoted)
	if err != nil {
		return fmt.Errorf("value %s is no string: %v", quoted, err)
	}
	if strings.Contains(want, "$") {
		return nil
	}
	match := func(v string) bool { return v == want }
	if op == "=~" || op == "!~" {
		// PromQL anchors a regex matcher at both ends.
		re, err := regexp.Compile("^(?:" + want + ")$")
		if err != nil {
			return fmt.Errorf("invalid regex: %v", err)
		}
		match = re.MatchString
	}
	for v := range values {
		if match(v) {
			return nil
		}
	}
	seen := make([]string, 0, len(values))
	for v := range values {
		seen = append(seen, strconv.Quote(v))
	}
	sort.Strings(seen)
	what := "selects no series"
	if op == "!=" || op == "!~" {
		what = "excludes no series (the matcher is a no-op)"
	}
	return fmt.Errorf("%q matches none of the exported values [%s]: it %s", want, strings.Join(seen, " "), what)
}

// parseSeries splits a series of the text exposition, as scrape keys it
// (`name{k="v",...}`), into its name and labels, undoing the exposition's
// escapes (\\, \" and \n) in the values.
func parseSeries(series string) (string, map[string]string, error) {
	name, rest, ok := strings.Cut(series, "{")
	ls := map[string]string{}
	if !ok {
		return name, ls, nil
	}
	rest = strings.TrimSuffix(rest, "}")
	for rest != "" {
		k, after, ok := strings.Cut(rest, "=\"")
		if !ok {
			return "", nil, fmt.Errorf("series %q: label without a quoted value", series)
		}
		var v strings.Builder
		i := 0
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' && i+1 < len(after) {
				i++
				if after[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(after[i])
		}
		if i == len(after) {
			return "", nil, fmt.Errorf("series %q: unterminated label value", series)
		}
		ls[k] = v.String()
		rest = strings.TrimPrefix(after[i+1:], ",")
	}
	return name, ls, nil
}

// TestCheckMatcher: the matcher check itself, on a label whose exported
// values are "success" and "failure".
func TestCheckMatcher(t *testing.T) {
	values := map[string]bool{"success": true, "failure": true}
	for _, c := range []struct {
		op, value string
		ok        bool
	}{
		{"=", `"failure"`, true},
		{"=", `"ok"`, false},  // selects nothing
		{"!=", `"ok"`, false}, // excludes nothing
		{"!=", `"success"`, true},
		{"=~", `"fail.*"`, true},
		{"=~", `"fail"`, false}, // anchored: a prefix is no match
		{"!~", `"succ.*|fail.*"`, true},
		{"!~", `"error|ok"`, false},
		{"=~", `"("`, false}, // an invalid regex
		{"=", `"$result"`, true},
		{"=", `failure`, false}, // unquoted
	} {
		err := checkMatcher(c.op, c.value, values)
		if (err == nil) != c.ok {
			t.Errorf("%s%s: error %v, want ok %v", c.op, c.value, err, c.ok)
		}
	}
}

// TestParseSeries: series keys of the text exposition, escapes included.
func TestParseSeries(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		want map[string]string
	}{
		{`up`, "up", map[string]string{}},
		{`a{b="c"}`, "a", map[string]string{"b": "c"}},
		{`a{b="x,y=\"z\"",c="1\\2\n"}`, "a", map[string]string{"b": `x,y="z"`, "c": "1\\2\n"}},
	} {
		name, ls, err := parseSeries(c.in)
		if err != nil || name != c.name || fmt.Sprint(ls) != fmt.Sprint(c.want) {
			t.Errorf("parseSeries(%q) = %q, %v, %v; want %q, %v", c.in, name, ls, err, c.name, c.want)
		}
	}
	for _, bad := range []string{`a{b}`, `a{b="c}`} {
		if _, _, err := parseSeries(bad); err == nil {
			t.Errorf("parseSeries(%q): no error", bad)
		}
	}
}
