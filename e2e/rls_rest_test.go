package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// startRLSRest starts a rate limit service of rls_rest.toml.tmpl on the
// YAML files of dir, its clock at noon UTC (day windows never end).
func startRLSRest(t *testing.T, dir, server, tables string, env ...string) *gw {
	t.Helper()
	return startGateway(t, "rls_rest.toml.tmpl", gwOpts{Data: map[string]any{"Dir": dir, "Server": server, "Tables": tables},
		FreshPorts: []string{"RLS"}, Env: append([]string{"GATEWAY_TEST_CLOCK_OFFSET=" + noonOffset().String()}, env...)})
}

// waitRLS calls until ok says the answer is the one wanted, or fails
// after 15 s (a hang guard, not a timing assertion).
func waitRLS(t *testing.T, what string, call func() *rlpb.RateLimitResponse, ok func(*rlpb.RateLimitResponse) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := call()
		if ok(r) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v", what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRLSWatchYAML: with server.watch_config, the envoyproxy/ratelimit
// files are watched like the TOML: a YAML file rewritten in place (its
// directory apart from the configuration's) is read again, and a new file
// matching rls.envoy_config's pattern is read when it appears, with no
// SIGHUP or /admin/reload.
func TestRLSWatchYAML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRLSYAML(t, dir, "1")
	g := startRLSRest(t, dir, "watch_config = true", "")
	c := dialRLS(t, g.Port("RLS"))
	expectRLS(t, "first", c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OK, 1, 0)
	expectRLS(t, "second", c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OVER_LIMIT, 1, 0)

	// The file rewritten in place: 1 a day becomes 5 (the count of 1
	// carries over, so 3 remain after this call).
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(replaceIP(rlsYAML, "5")), 0o600); err != nil {
		t.Fatal(err)
	}
	waitRLS(t, "after the YAML changed", func() *rlpb.RateLimitResponse {
		return c.one("edge", desc("remote_address", "b"), desc("free", "x"))
	}, func(r *rlpb.RateLimitResponse) bool {
		return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 5
	})
	expectRLS(t, "raised", c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OK, 5, 3)

	// A new file the pattern matches: its domain is limited once read.
	writeFileAtomic(t, filepath.Join(dir, "other.yaml"), []byte("domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2}\n"))
	waitRLS(t, "after a new file", func() *rlpb.RateLimitResponse {
		return c.one("other", desc("k", "peek-"+time.Now().Format("150405.000000")))
	}, func(r *rlpb.RateLimitResponse) bool {
		return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 2
	})
}

// replaceIP is rlsYAML's remote_address limit set to n a day.
func replaceIP(yaml, n string) string { return strings.Replace(yaml, "{{IP}}", n, 1) }
