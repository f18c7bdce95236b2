package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy/config"
)

// rlsPolicy is one unlimited route and a rate limit service allowing
// each user 1 call a second.
func rlsPolicy(t *testing.T) *config.Config {
	t.Helper()
	c := config.Default()
	web := config.DefaultRoute()
	web.Name, web.PathPrefix, web.Upstream = "web", "/web", "http://127.0.0.1:1"
	c.Routes = []config.RouteConfig{web}
	yaml := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(yaml, []byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.RLS = config.RLSConfig{Listen: "127.0.0.1:18081", EnvoyConfig: []string{yaml}}
	return &c
}

func rlsEntry(at, latency time.Duration, user, code string) accesslog.Entry {
	e := accesslog.Entry{Time: base.Add(at), Latency: latency, Status: 200, Outcome: "ok", Decision: "allowed",
		RLS: &accesslog.RLSCall{Domain: "edge", Code: code, Descriptors: []accesslog.RLSDescriptor{
			{Code: code, Entries: []accesslog.RLSEntry{{Key: "user", Value: user}}}}}}
	if code == "over_limit" {
		e.Status, e.Outcome, e.Decision = 429, "over_limit", "denied"
	}
	return e
}

// TestReplayRLS: call lines are decided in the order the calls started,
// as HTTP lines are (a slow call's line is written after a later one's),
// beside HTTP lines, each hashed value on its own counter; the report
// says which were decided as logged and tallies each rule.
func TestReplayRLS(t *testing.T) {
	p := compile(t, *rlsPolicy(t))
	es := []accesslog.Entry{
		// Written in finish order: the call that started at 0 took
		// 200 ms, so the one at 100 ms was written first.
		rlsEntry(100*time.Millisecond, 0, "u", "over_limit"),
		entry(150*time.Millisecond, "10.0.0.1", "", "web", "/web/a"),
		rlsEntry(0, 200*time.Millisecond, "u", "ok"),
		rlsEntry(300*time.Millisecond, 0, "v", "ok"),
		rlsEntry(2*time.Second, 0, "u", "ok"),
		// Logged as allowed, but its user had spent the second's call.
		rlsEntry(2100*time.Millisecond, 0, "u", "ok"),
	}
	replayEachFormat(t, p, es, func(t *testing.T, rep *Report) {
		r := rep.RLS
		if rep.Requests != 1 || r.Calls != 5 || r.AsLogged != 4 || r.Otherwise != 1 || r.StoreErrors != 0 {
			t.Fatalf("report %+v %+v", rep, r)
		}
		if len(r.Samples) != 1 || !r.Samples[0].At.Equal(base.Add(2100*time.Millisecond)) || r.Samples[0].Replayed != "over_limit" {
			t.Fatalf("samples %+v", r.Samples)
		}
		if len(r.Rules) != 1 || r.Rules[0].Name != "edge.user" || r.Rules[0].Requests != 5 || r.Rules[0].Allowed != 3 || r.Rules[0].Denied != 2 {
			t.Fatalf("rules %+v", r.Rules[0])
		}
		var out strings.Builder
		if err := rep.Write(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "rate limit service: 5 calls, 4 decided as logged, 1 otherwise") ||
			!strings.Contains(out.String(), "otherwise: ") {
			t.Fatalf("report text:\n%s", out.String())
		}
	})
}
