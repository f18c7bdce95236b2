package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// startMessages starts an HTTP/1.1 gateway whose [server] table gets the
// lines server and whose [identity] table, then limits and routes, are
// body (body's lines before its first table belong to [identity]).
func startMessages(t *testing.T, server, body string, env ...string) *front {
	t.Helper()
	pr := protocols[0]
	data, _, _, _ := frontData(t, pr, t.TempDir(), "", "", body)
	data["Front"] = server
	return &front{gw: startGateway(t, "front.toml.tmpl", gwOpts{Data: data, Env: env}), proto: pr}
}

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestID: every request gets an X-Request-Id, which the upstream
// receives, the client reads back (on the upstream's answer and on the
// gateway's own: 429, 404) and the access log records. A client's own id
// is replaced unless it came through a trusted proxy (and is valid then);
// with server.request_id = false a client's id passes untouched and none
// is added. Mutations checked: without the id set in ServeHTTP (requestID)
// every assertion on the upstream's copy fails; keeping every client's id
// (dropping the PeerTrusted check) fails "untrusted".
func TestRequestID(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	f := startMessages(t, "", fmt.Sprintf(`trusted_proxies = ["127.0.0.2"]

[access_log]
path = %q
format = "jsonl"

[[limits]]
name = "one"
rates = ["1/minute"]
by = ["ip"]

[[routes]]
name = "api"
path_prefix = "/api"
upstream = %q

[[routes]]
name = "limited"
path_prefix = "/limited"
upstream = %[2]q
limits = ["one"]
`, logPath, up.URL))
	c, proxyC := newClient(t, "127.0.0.1"), newClient(t, "127.0.0.2")

	r := get(t, c, f.url("/api/x"), nil)
	id := r.Header.Get("X-Request-Id")
	if !generatedID.MatchString(id) {
		t.Fatalf("answer's X-Request-Id %q, want 32 hex digits: %s", id, r)
	}
	if got := r.echo(t).Header.Values("X-Request-Id"); len(got) != 1 || got[0] != id {
		t.Fatalf("the upstream received X-Request-Id %q, want [%q]", got, id)
	}
	if id2 := get(t, c, f.url("/api/x"), nil).Header.Get("X-Request-Id"); id2 == id {
		t.Fatalf("two requests share the id %q", id)
	}
	// Hop-by-hop naming does not strip the id on its way up.
	if s := get(t, c, f.url("/api/x"), map[string]string{"Connection": "X-Request-Id"}).echo(t); !generatedID.MatchString(s.Header.Get("X-Request-Id")) {
		t.Fatalf("Connection: X-Request-Id stripped the id: upstream saw %q", s.Header.Values("X-Request-Id"))
	}

	// A respelling a CGI-style upstream reads as the id goes.
	if s := get(t, c, f.url("/api/x"), map[string]string{"X_Request_Id": "forged"}).echo(t); s.Header.Get("X_Request_Id") != "" || s.Header.Get("X-Request-Id") == "forged" {
		t.Fatalf("X_Request_Id reached the upstream: %v", s.Header)
	}
	t.Run("untrusted", func(t *testing.T) {
		r := get(t, c, f.url("/api/x"), map[string]string{"X-Request-Id": "forged-correlation"})
		got := r.Header.Get("X-Request-Id")
		if got == "forged-correlation" || !generatedID.MatchString(got) || r.echo(t).Header.Get("X-Request-Id") != got {
			t.Fatalf("a client's own id from an untrusted peer: answer %q, upstream %q; want a fresh id in both", got, r.echo(t).Header.Values("X-Request-Id"))
		}
	})
	t.Run("trusted", func(t *testing.T) {
		for _, tc := range []struct{ sent, name string }{
			{"lb-7f3a-0001", "valid"},
			{strings.Repeat("a", 129), "too long"},
			{"has space", "space"},
			{"caf\xc3\xa9", "non-ASCII"},
		} {
			r := get(t, proxyC, f.url("/api/x"), map[string]string{"X-Request-Id": tc.sent})
			got := r.Header.Get("X-Request-Id")
			if keep := tc.name == "valid"; keep != (got == tc.sent) || (!keep && !generatedID.MatchString(got)) {
				t.Errorf("%s id %q from a trusted proxy: answer %q (kept: %v)", tc.name, tc.sent, got, got == tc.sent)
			}
			if up := r.echo(t).Header.Get("X-Request-Id"); up != got {
				t.Errorf("%s: upstream saw %q, client read %q", tc.name, up, got)
			}
		}
	})
	t.Run("gateway answers", func(t *testing.T) {
		get(t, c, f.url("/limited"), nil)
		r := get(t, c, f.url("/limited"), nil)
		if r.Status != 429 || !generatedID.MatchString(r.Header.Get("X-Request-Id")) {
			t.Fatalf("429 without an X-Request-Id: %s", r)
		}
		if r := get(t, c, f.url("/nowhere"), nil); r.Status != 404 || !generatedID.MatchString(r.Header.Get("X-Request-Id")) {
			t.Fatalf("404 without an X-Request-Id: %s", r)
		}
	})
	t.Run("logged", func(t *testing.T) {
		data := flushLog(t, f.gw, logPath)
		if !strings.Contains(string(data), `"request_id":"`+id+`"`) {
			t.Fatalf("the access log has no line with request_id %q:\n%s", id, data)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e struct {
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil || e.RequestID == "" {
				t.Errorf("line without request_id (%v): %s", err, line)
			}
		}
		// gateway replay reads the new field as it read lines without it.
		code, stdout, stderr := runGateway(t, nil, "replay", "--config", f.Config, "--log", logPath)
		if code != 0 || !strings.Contains(stdout, "(0 malformed)") {
			t.Fatalf("replay of a log with request ids: exit %d\n%s%s", code, stdout, stderr)
		}
	})
}

// TestRequestIDOff: server.request_id = false keeps today's behaviour: a
// client's X-Request-Id reaches the upstream as sent, none is added.
// Mutation checked: ignoring the setting fails it.
func TestRequestIDOff(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := startMessages(t, "request_id = false", fmt.Sprintf(`
[[routes]]
name = "api"
path_prefix = "/"
upstream = %q
`, up.URL))
	c := newClient(t, "")
	r := get(t, c, f.url("/x"), map[string]string{"X-Request-Id": "client-chosen"})
	if got := r.echo(t).Header.Get("X-Request-Id"); got != "client-chosen" {
		t.Fatalf("upstream saw %q, want the client's id untouched", got)
	}
	if r := get(t, c, f.url("/x"), nil); r.Header.Get("X-Request-Id") != "" || r.echo(t).Header.Get("X-Request-Id") != "" {
		t.Fatalf("an id was added with request_id = false: %s", r)
	}
}

// TestHeaderRules: request_headers and response_headers of a route, with
// templates, through the binary. The client cannot override a set header
// (not by sending it, nor by naming it in Connection), {client} is the
// log's hash (never the raw API key), {request_id} is the answer's id,
// response rules touch the upstream's answer and not the gateway's own
// 429. Mutations checked: applying request rules before ReverseProxy's
// hop-by-hop removal (on the incoming request) fails "Connection";
// dropping escapeing in Template.Expand is caught by the unit table
// (TestTemplateHostile); applying response rules in finishHeader (to
// every answer) fails "gateway answers".
func TestHeaderRules(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := startMessages(t, "", fmt.Sprintf(`
[[limits]]
name = "two"
rates = ["2/minute"]
by = ["client"]

[[routes]]
name = "api"
path_prefix = "/api"
upstream = %q
limits = ["two"]
request_headers = { set = { "X-Gateway" = "tollgate", "X-Who" = "{client}|{route}|{request_id}|{{lit}}" }, add = { "X-Via" = "tollgate" }, remove = ["X-Debug"] }
response_headers = { set = { "X-Frame-Options" = "DENY" }, remove = ["X-Upstream-Secret"], add = { "X-Route" = "{route}" } }

[[routes]]
name = "plain"
path_prefix = "/plain"
upstream = %[1]q
`, up.URL))
	c := newClient(t, "")
	const key = "raw-api-key-123"
	r := get(t, c, f.url("/api/x"), map[string]string{"X-API-Key": key, "X-Gateway": "evil", "X-Debug": "1", "X-Via": "client-proxy",
		"Connection": "X-Gateway, X-Via", "X_Gateway": "evil", "x_debug": "1"})
	s := r.echo(t)
	if got := s.Header.Values("X-Gateway"); len(got) != 1 || got[0] != "tollgate" {
		t.Errorf("upstream X-Gateway %q, want [tollgate] (the client's value and its Connection trick replaced)", got)
	}
	if s.Header.Get("X-Debug") != "" {
		t.Errorf("X-Debug reached the upstream: %q", s.Header.Values("X-Debug"))
	}
	// Respelled with '_', a CGI-style upstream would read them as the
	// header the rule sets or removes.
	if s.Header.Get("X_Gateway") != "" || s.Header.Get("X_Debug") != "" {
		t.Errorf("respelled copies reached the upstream: %v", s.Header)
	}
	if got := s.Header.Values("X-Via"); len(got) != 1 || got[0] != "tollgate" {
		// The client's X-Via was named in Connection: hop-by-hop, gone
		// before the rule added the gateway's.
		t.Errorf("upstream X-Via %q, want [tollgate]", got)
	}
	who := strings.Split(s.Header.Get("X-Who"), "|")
	if len(who) != 4 || who[0] == "" || who[1] != "api" || who[2] != r.Header.Get("X-Request-Id") || who[3] != "{lit}" {
		t.Errorf("X-Who = %q, want client|api|<the answer's id>|{lit}", s.Header.Get("X-Who"))
	}
	if strings.Contains(s.Header.Get("X-Who"), key) {
		t.Errorf("{client} put the raw API key upstream: %q", s.Header.Get("X-Who"))
	}
	if r.Header.Get("X-Frame-Options") != "DENY" || r.Header.Get("X-Route") != "api" {
		t.Errorf("response rules not applied to the upstream's answer: %s", r)
	}
	if p := get(t, c, f.url("/plain/x"), map[string]string{"X-Debug": "1", "X-Gateway": "client"}); p.echo(t).Header.Get("X-Debug") != "1" ||
		p.echo(t).Header.Get("X-Gateway") != "client" || p.Header.Get("X-Frame-Options") != "" {
		t.Errorf("a route without rules changed headers: %s", p)
	}
	t.Run("gateway answers", func(t *testing.T) {
		get(t, c, f.url("/api/x"), map[string]string{"X-API-Key": key})
		r := get(t, c, f.url("/api/x"), map[string]string{"X-API-Key": key})
		if r.Status != 429 {
			t.Fatalf("third request: %s, want 429", r)
		}
		if r.Header.Get("X-Frame-Options") != "" || r.Header.Get("X-Route") != "" {
			t.Fatalf("response rules applied to the gateway's own 429: %s", r)
		}
	})
}

// TestHeaderRulesRefused: header rules that would touch what the gateway
// owns, or that are not valid headers, are refused by validate with the
// field path. Mutation checked: emptying ownedExact lets the first rows
// through.
func TestHeaderRulesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, tc := range []struct{ rules, want string }{
		{`request_headers = { set = { "X-Real-IP" = "1.2.3.4" } }`, `routes[0].request_headers.set["x-real-ip"]`},
		{`request_headers = { set = { "X_Real_IP" = "1.2.3.4" } }`, `gateway owns`},
		{`request_headers = { remove = ["X-Forwarded-For"] }`, `routes[0].request_headers.remove["X-Forwarded-For"]`},
		{`request_headers = { add = { "X-Forwarded-Proto" = "https" } }`, `x-forwarded-*`},
		{`request_headers = { set = { "Transfer-Encoding" = "chunked" } }`, `gateway owns`},
		{`request_headers = { set = { "Host" = "internal" } }`, `gateway owns`},
		{`request_headers = { remove = ["X-Request-Id"] }`, `gateway owns`},
		{`request_headers = { set = { "X-Gateway-User" = "admin" } }`, `gateway owns`},
		{`request_headers = { set = { "Proxy-Authorization" = "x" } }`, `proxy-*`},
		{`response_headers = { set = { "Retry-After" = "0" } }`, `rate-limit header`},
		{`response_headers = { remove = ["X-RateLimit-Remaining"] }`, `rate-limit header`},
		{`response_headers = { set = { "Access-Control-Allow-Origin" = "*" } }` + "\ncors = { origins = [\"https://a.example\"] }", `CORS header`},
		{`request_headers = { set = { "X-A" = "line\r\nX-Injected: 1" } }`, `control byte`},
		{`request_headers = { set = { "X-A" = "nul\u0000" } }`, `control byte`},
		{`request_headers = { set = { "X A" = "v" } }`, `invalid header name`},
		{`request_headers = { set = { "X-A" = "{secret}" } }`, `unknown field {secret}`},
		{`request_headers = { set = { "X-A" = "{client" } }`, `unclosed '{'`},
		{`request_headers = { set = { "X-A" = "x}" } }`, `unmatched '}'`},
		{`request_headers = { set = { "X-A" = "` + strings.Repeat("v", 5000) + `" } }`, `longer than 4096`},
		{`cors = { origins = ["*"], credentials = true }`, `routes[0].cors.credentials`},
		{`cors = { origins = ["https://*.example.com"] }`, `wildcards are not supported`},
		{`cors = { origins = ["null"] }`, `"null"`},
		{`cors = { origins = ["https://example.com/"] }`, `no path`},
		{`cors = { origins = ["example.com"] }`, `scheme://host`},
		{`max_body_bytes = -1`, `routes[0].max_body_bytes`},
	} {
		cfg := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
admin_listen = ""

[[routes]]
name = "r"
path_prefix = "/"
upstream = "http://127.0.0.1:1"
%s
`, tc.rules)
		path := filepath.Join(dir, fmt.Sprintf("c%d.toml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runGateway(t, nil, "validate", "--config", path)
		if code == 0 || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("%s: validate exit %d, want a refusal naming %q:\n%s%s", tc.rules[:min(len(tc.rules), 80)], code, tc.want, stdout, stderr)
		}
	}
}
