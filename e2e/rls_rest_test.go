package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/gateway/internal/redistest"
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

// rlsLogTables are the tables of a gateway that logs its calls (format
// f) to logPath beside the HTTP requests of one route limited to 2 a day
// per client.
func rlsLogTables(logPath, f, upstream string) string {
	return fmt.Sprintf(`[access_log]
path = %q
format = %q
flush_interval = "50ms"

[identity]
sources = ["api_key", "ip"]

[[limits]]
name = "few"
rates = ["2/day"]
algorithm = "fixed_window"
by = ["client"]

[[routes]]
name = "up"
path_prefix = "/"
upstream = %q
limits = ["few"]
`, logPath, f, upstream)
}

// rlsTraffic makes the calls the access log tests record: allowed and
// denied, several descriptors at once, nested, shadow, unlimited, an
// unknown domain, the request's and a descriptor's own hits_addend.
func rlsTraffic(c *rlsClient) []rlpb.RateLimitResponse_Code {
	var got []rlpb.RateLimitResponse_Code
	call := func(req *rlpb.RateLimitRequest) {
		got = append(got, c.call(req).GetOverallCode())
	}
	one := func(ds ...*commonpb.RateLimitDescriptor) {
		call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: ds})
	}
	for range 4 {
		one(desc("remote_address", "10.0.0.77"))
	}
	one(desc("remote_address", "10.0.0.77"), desc("path", "/login"))
	one(desc("remote_address", "10.0.0.78"), desc("path", "/login"))
	for range 5 {
		one(desc("path", "/login"))
	}
	one(desc("shadow", "s"))
	one(desc("shadow", "s"))
	one(desc("free", "x"), desc("nope", "y"))
	call(&rlpb.RateLimitRequest{Domain: "nowhere", Descriptors: []*commonpb.RateLimitDescriptor{desc("k", "v")}})
	call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{desc("bulk", "b")}, HitsAddend: 4})
	peek := desc("bulk", "b")
	peek.HitsAddend = wrapperspb.UInt64(0)
	call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{peek}, HitsAddend: 9})
	call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{desc("bulk", "b")}, HitsAddend: 7})
	own := desc("bulk", "b")
	own.HitsAddend = wrapperspb.UInt64(6)
	call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{own}, HitsAddend: 100})
	return got
}

// TestRLSAccessLogReplay: every call of the rate limit service is one
// access log line, in both formats, beside the HTTP requests' lines; the
// values the configuration names (/login) are written as they are and
// the others (an address) hashed; `gateway replay` of that mixed log
// decides every call as it was decided live (the overall and every
// descriptor's code) and the HTTP requests as before.
func TestRLSAccessLogReplay(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"combined", "jsonl"} {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeRLSYAML(t, dir, "3")
			up := newUpstream(t)
			logPath := filepath.Join(dir, "access.log")
			g := startRLSRest(t, dir, "", rlsLogTables(logPath, f, up.URL))
			c := dialRLS(t, g.Port("RLS"))
			hc := newClient(t, "")
			key := map[string]string{"X-API-Key": "k1"}
			expect2(t, hc, g.url("/a"), key, 200)
			got := rlsTraffic(c)
			expect2(t, hc, g.url("/b"), key, 200)
			expect2(t, hc, g.url("/c"), key, 429)
			over := 0
			for _, code := range got {
				if code == rlpb.RateLimitResponse_OVER_LIMIT {
					over++
				}
			}
			// 4th address call, the mixed call, /login's 6th, bulk +7.
			if over != 4 {
				t.Fatalf("%d calls over the limit, want 4: %v", over, got)
			}
			g.stop(t)
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			log := string(data)
			if n := strings.Count(log, "\n"); n != len(got)+3 {
				t.Fatalf("%d lines for %d calls and 3 requests:\n%s", n, len(got), log)
			}
			if strings.Contains(log, "10.0.0.77") || !strings.Contains(log, "/login") || !strings.Contains(log, "~") {
				t.Fatalf("an unmatched value logged raw, or a matched one hashed:\n%s", log)
			}
			rep := runReplay(t, g.Config, logPath)
			want := fmt.Sprintf("rate limit service: %d calls, %d decided as logged, 0 otherwise", len(got), len(got))
			if !strings.Contains(rep, want) || !strings.Contains(rep, "replayed 3 requests") {
				t.Fatalf("replay report lacks %q:\n%s", want, rep)
			}
			if row := replayRow(t, rep, "few"); row[4] != "2" || row[5] != "1" {
				t.Fatalf("few: %v\n%s", row, rep)
			}
			// remote_address: 4 calls on 10.0.0.77 (3 allowed), the mixed
			// one denied, 10.0.0.78 allowed.
			if row := replayRow(t, rep, "edge.remote_address"); row[3] != "6" || row[4] != "4" || row[5] != "2" {
				t.Fatalf("edge.remote_address: %v\n%s", row, rep)
			}

			// What if an address had 1 a day? The hashed address still
			// counts on its own counter: its 2nd and 3rd calls would have
			// been denied, and the report says so.
			writeRLSYAML(t, dir, "1")
			rep = runReplay(t, g.Config, logPath)
			want = fmt.Sprintf("rate limit service: %d calls, %d decided as logged, 2 otherwise", len(got), len(got)-2)
			if !strings.Contains(rep, want) || !strings.Contains(rep, "otherwise: ") {
				t.Fatalf("what-if replay lacks %q:\n%s", want, rep)
			}
			if row := replayRow(t, rep, "edge.remote_address"); row[3] != "6" || row[4] != "2" || row[5] != "4" {
				t.Fatalf("what-if edge.remote_address: %v\n%s", row, rep)
			}
		})
	}
}

// TestRLSCandidate: a candidate configuration's [rls] rules decide every
// call beside the live ones without changing an answer, and
// /admin/candidate reports where they would have answered otherwise, as
// it does for HTTP limits; promoting it makes its rules live.
func TestRLSCandidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	g := startRLSRest(t, dir, "", "")
	c := dialRLS(t, g.Port("RLS"))

	// The candidate's YAML lies beside the live configuration (a posted
	// candidate may name no file elsewhere): 1 a day, not 3.
	cdir := filepath.Join(filepath.Dir(g.Config), "cand")
	if err := os.Mkdir(cdir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRLSYAML(t, cdir, "1")
	body := fmt.Sprintf("[server]\nlisten = %q\n\n[rls]\nlisten = %q\nenvoy_config = [%q]\n", g.Listen, g.Port("RLS"), filepath.Join(cdir, "*.yaml"))
	r, err := tryDo(&http.Client{Timeout: 10 * time.Second}, "POST", g.adminURL("/admin/candidate"),
		map[string]string{"Content-Type": "application/toml"}, []byte(body))
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("POST /admin/candidate: %v %v", r, err)
	}

	// Three calls for x: all allowed live (3 a day); the candidate would
	// deny the 2nd and 3rd. A call on /login agrees.
	for i := range 3 {
		if code := c.one("edge", desc("remote_address", "x")).GetOverallCode(); code != rlpb.RateLimitResponse_OK {
			t.Fatalf("call %d: %v: a candidate must never change an answer", i+1, code)
		}
	}
	c.one("edge", desc("path", "/login"))
	var rep struct {
		candidateReport
		FirstDiverging []struct {
			Method, Path    string
			Client, Kind    string
			CandidateDenied []string `json:"candidate_denied"`
		} `json:"first_diverging"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := adminDo(t, g, "GET", "/admin/candidate", "")
		rep.Requests = 0
		if r.Status != 200 || json.Unmarshal(r.Body, &rep) != nil {
			t.Fatalf("GET /admin/candidate: %s", r)
		}
		if rep.Requests >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the candidate recorded %d calls of 4: %s", rep.Requests, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rep.Requests != 4 || rep.AgreeAllowed != 2 || rep.ExtraDenials != 2 || rep.FewerDenials != 0 || rep.StoreErrors != 0 {
		t.Fatalf("report %+v: want 4 calls, 2 agreed, 2 extra denials", rep)
	}
	if d := rep.Limits["edge.remote_address"]; d.ExtraDenials != 2 {
		t.Fatalf("limits %+v: want 2 extra denials by edge.remote_address", rep.Limits)
	}
	hashed := accessLogHash("descriptor", "remote_address=x")
	if len(rep.TopClients) != 1 || rep.TopClients[0].Client != hashed || rep.TopClients[0].Extra != 2 {
		t.Fatalf("top clients %+v: want the descriptor, hashed (%s)", rep.TopClients, hashed)
	}
	if f := rep.FirstDiverging; len(f) != 2 || f[0].Method != "RLS" || f[0].Path != "edge" || f[0].Kind != "descriptor" ||
		strings.Join(f[0].CandidateDenied, ",") != "edge.remote_address" {
		t.Fatalf("first diverging %+v", f)
	}

	// Promoted, its rules answer: 1 a day for a fresh address.
	if r := adminDo(t, g, "POST", "/admin/candidate/promote", ""); r.Status != 200 {
		t.Fatalf("promote: %s", r)
	}
	expectRLS(t, "promoted, first", c.one("edge", desc("remote_address", "y")).GetStatuses()[0], rlpb.RateLimitResponse_OK, 1, 0)
	expectRLS(t, "promoted, second", c.one("edge", desc("remote_address", "y")).GetStatuses()[0], rlpb.RateLimitResponse_OVER_LIMIT, 1, 0)
}

// TestRLSRedisLogCandidate is the access log, replay and candidate on a
// Redis store: a candidate counts under the live Redis's candidate
// prefix, a call answered by store.on_error while Redis is down is
// logged as a store error, and the replay of the log decides every other
// call as logged and counts that one apart.
func TestRLSRedisLogCandidate(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	logPath := filepath.Join(dir, "access.log")
	data := redisData(rs.Addr, nil, "allow", "500ms", fmt.Sprintf("[access_log]\npath = %q\nformat = \"combined\"\nflush_interval = \"50ms\"\n", logPath))
	data["RLSDir"] = dir
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, FreshPorts: []string{"RLS"}})
	c := dialRLS(t, g.Port("RLS"))

	cdir := filepath.Join(filepath.Dir(g.Config), "cand")
	if err := os.Mkdir(cdir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRLSYAML(t, cdir, "1")
	body := fmt.Sprintf("[server]\nlisten = %q\n\n[rls]\nlisten = %q\nenvoy_config = [%q]\n", g.Listen, g.Port("RLS"), filepath.Join(cdir, "*.yaml"))
	r, err := tryDo(&http.Client{Timeout: 10 * time.Second}, "POST", g.adminURL("/admin/candidate"),
		map[string]string{"Content-Type": "application/toml"}, []byte(body))
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("POST /admin/candidate: %v %v", r, err)
	}
	got := rlsTraffic(c)
	var rep candidateReport
	deadline := time.Now().Add(10 * time.Second)
	for rep.Requests < int64(len(got)) {
		if time.Now().After(deadline) {
			t.Fatalf("the candidate recorded %d calls of %d", rep.Requests, len(got))
		}
		time.Sleep(20 * time.Millisecond)
		r := adminDo(t, g, "GET", "/admin/candidate", "")
		if r.Status != 200 || json.Unmarshal(r.Body, &rep) != nil {
			t.Fatalf("GET /admin/candidate: %s", r)
		}
	}
	// 1 a day, not 3: the address's 2nd and 3rd calls; its 4th and the
	// mixed call both sides deny.
	if d := rep.Limits["edge.remote_address"]; d.ExtraDenials != 2 || rep.StoreErrors != 0 {
		t.Fatalf("candidate report %+v", rep)
	}
	keys, err := redistest.Do(rs.Addr, "KEYS", "tollgate:candidate:*")
	if ks, _ := keys.([]any); err != nil || len(ks) == 0 {
		t.Fatalf("no candidate counter under tollgate:candidate: (%v, %v)", keys, err)
	}

	// Redis down: on_error allow answers OK, and the line says so.
	rs.Kill()
	if code := c.one("edge", desc("remote_address", "down")).GetOverallCode(); code != rlpb.RateLimitResponse_OK {
		t.Fatalf("with Redis down and on_error allow: %v", code)
	}
	g.stop(t)
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "outcome=store_error decision=allowed") {
		t.Fatalf("no store_error line:\n%s", log)
	}
	out := runReplay(t, g.Config, logPath)
	want := fmt.Sprintf("rate limit service: %d calls, %d decided as logged, 0 otherwise, 1 logged as store errors", len(got)+1, len(got))
	if !strings.Contains(out, want) {
		t.Fatalf("replay report lacks %q:\n%s", want, out)
	}
}
