package policy

import (
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestValidateUsage: every check of cost_response_json, cost_request_json,
// on_missing_usage, cost_scan_bytes and cost_request_bytes, with the
// exact problem line each must produce.
func TestValidateUsage(t *testing.T) {
	budget := func(c *config.Config) {
		c.Limits[0].Count, c.Limits[0].CostResponseJSON, c.Limits[0].CostRequestJSON = "response", "usage.total_tokens", "max_tokens"
	}
	tests := []problemCase{
		{"json without response", func(c *config.Config) { c.Limits[0].CostResponseJSON = "usage.total_tokens" }, []string{`limits[0].cost_response_json: applies only with count = "response"`}},
		{"request json without response", func(c *config.Config) { c.Limits[0].CostRequestJSON = "max_tokens" }, []string{`limits[0].cost_request_json: applies only with count = "response"`}},
		{"on_missing_usage alone", func(c *config.Config) { c.Limits[0].OnMissingUsage = "zero" }, []string{`limits[0].on_missing_usage: applies only with cost_response_json or cost_request_json`}},
		{"bad path", func(c *config.Config) { budget(c); c.Limits[0].CostResponseJSON = "usage..total" }, []string{`limits[0].cost_response_json: path "usage..total": each key must be 1..64 bytes`}},
		{"bad request path", func(c *config.Config) { budget(c); c.Limits[0].CostRequestJSON = `max"tokens` }, []string{`limits[0].cost_request_json: path "max\"tokens": keys are printable ASCII`}},
		{"header and json", func(c *config.Config) { budget(c); c.Limits[0].CostResponseHeader = "X-Units" }, []string{`limits[0].cost_response_json: use one of cost_response_header and cost_response_json`}},
		{"estimate without usage", func(c *config.Config) { budget(c); c.Limits[0].CostResponseJSON = "" }, []string{`limits[0].cost_request_json: needs the usage to settle to`}},
		{"elastic", func(c *config.Config) { budget(c); c.Limits[0].Algorithm = "fixed_window_elastic" }, []string{`limits[0].cost_request_json: a reservation cannot be settled on fixed_window_elastic`}},
		{"on_missing_usage value", func(c *config.Config) { budget(c); c.Limits[0].OnMissingUsage = "guess" }, []string{`limits[0].on_missing_usage: unknown value "guess" (want estimate, zero or cost)`}},
		{"scan bytes", func(c *config.Config) { budget(c); c.Limits[0].CostScanBytes = 0 }, []string{`limits[0].cost_scan_bytes: must be in 1..1099511627776, got 0`}},
		{"request bytes", func(c *config.Config) { budget(c); c.Limits[0].CostRequestBytes = 65 << 20 }, []string{`limits[0].cost_request_bytes: must be in 1..67108864, got 68157440`}},
	}
	testProblems(t, base, tests)
}

// TestCompileUsage: a token budget compiles to what the proxy reads; a
// budget without count_statuses counts no 5xx.
func TestCompileUsage(t *testing.T) {
	c := base()
	c.Limits[0].Count, c.Limits[0].CostResponseJSON, c.Limits[0].CostRequestJSON = "response", "usage.total_tokens", "max_tokens"
	c.Limits[0].OnMissingUsage = "zero"
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	var l *Limit
	for _, r := range p.Routes {
		for _, x := range r.Limits {
			if x.Response != nil {
				l = x
			}
		}
	}
	if l == nil || l.Response.Usage == nil {
		t.Fatal("no token budget compiled")
	}
	u := l.Response.Usage
	if u.Body.String() != "usage.total_tokens" || u.Estimate.String() != "max_tokens" || !u.Reserves() ||
		u.OnMissing != MissingZero || u.ScanBytes != 64<<20 || u.EstimateBytes != 1<<20 {
		t.Errorf("compiled %+v", u)
	}
	if !l.Response.Counts(499) || l.Response.Counts(500) || l.Response.Counts(503) {
		t.Errorf("statuses %v: want 5xx not counted", l.Response.Statuses)
	}
}

// TestUsageBatched: a token budget that reserves may be batched (its
// reservation is a count a lease holds); one that only reads the usage
// may not, as any limit counting by response.
func TestUsageBatched(t *testing.T) {
	c := base()
	c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].Sync = "fixed_window", []string{"1000/1h"}, "batched"
	c.Limits[0].Count, c.Limits[0].CostResponseJSON, c.Limits[0].CostRequestJSON = "response", "usage.total_tokens", "max_tokens"
	if _, err := Compile(c, noEnv, os.ReadFile); err != nil {
		t.Fatalf("a batched token budget: %v", err)
	}
	c.Limits[0].CostRequestJSON = ""
	if _, err := Compile(c, noEnv, os.ReadFile); err == nil || !strings.Contains(err.Error(), `"batched" cannot be combined with count = "response"`) {
		t.Fatalf("a batched budget without a reservation: %v", err)
	}
}
