package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// guardData fills admin_guard.toml.tmpl: token names the token's
// variable ("" for none), hosts is the TOML list body of allowed_hosts.
func guardData(token, hosts string) map[string]any {
	return map[string]any{"Token": token, "Insecure": false, "Hosts": hosts}
}

// attackerConfig is what a page elsewhere would post: the route without
// its limit.
const attackerConfig = `[[routes]]
name = "api"
path_prefix = "/api"
respond = { status = 200, body = "pwned" }
`

// TestAdminCSRFRefused: with no admin token (the default), the requests
// another site's page can make the operator's browser send without a
// preflight (a text/plain or form body, a body-less POST, a DELETE with
// the page's Origin) are refused 403 or 415 before any handler: no
// candidate is installed or promoted, nothing reloaded or reset, the
// configuration and its limit unchanged. The same request sent as the
// dashboard sends it (same Origin, a TOML body) still works.
func TestAdminCSRFRefused(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "admin_guard.toml.tmpl", gwOpts{Data: guardData("", "")})
	c := &http.Client{Timeout: 10 * time.Second}
	before := adminDo(t, g, "GET", "/admin/config", "")
	if before.Status != 200 {
		t.Fatalf("GET /admin/config: %s", before)
	}
	// The client counted by the limit: 1 of 2 used.
	if r := get(t, c, g.url("/api"), nil); r.Status != 200 {
		t.Fatalf("GET /api: %s", r)
	}
	evil := "https://evil.example"
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		want               int
	}{
		{"a form posting text/plain (fetch no-cors)", "POST", "/admin/candidate",
			map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": evil, "Sec-Fetch-Site": "cross-site"}, attackerConfig, 403},
		{"text/plain from a browser that sends no Origin", "POST", "/admin/candidate",
			map[string]string{"Content-Type": "text/plain"}, attackerConfig, 415},
		{"an HTML form (urlencoded)", "POST", "/admin/candidate",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "x=" + attackerConfig, 415},
		{"a multipart form", "POST", "/admin/candidate",
			map[string]string{"Content-Type": "multipart/form-data; boundary=b"}, "--b\r\n\r\n" + attackerConfig + "\r\n--b--", 415},
		{"promote from another page", "POST", "/admin/candidate/promote",
			map[string]string{"Origin": evil, "Sec-Fetch-Site": "cross-site"}, "", 403},
		{"promote from a sandboxed frame", "POST", "/admin/candidate/promote",
			map[string]string{"Origin": "null"}, "", 403},
		{"reload from another page", "POST", "/admin/reload",
			map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403},
		{"reset from another page", "DELETE", "/admin/limits?limit=per-client&key=ip:127.0.0.1",
			map[string]string{"Origin": evil}, "", 403},
		{"override from a sibling site", "PUT", "/admin/overrides",
			map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-site", "Origin": "http://x." + g.Admin}, "{}", 403},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		r, err := tryDo(c, tc.method, g.adminURL(tc.path), tc.hdr, body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Status != tc.want {
			t.Errorf("%s: %s %s answered %d, want %d: %s", tc.name, tc.method, tc.path, r.Status, tc.want, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want a problem body", tc.name, ct)
		}
	}
	if r := adminDo(t, g, "GET", "/admin/candidate", ""); r.Status != 404 {
		t.Errorf("GET /admin/candidate: %d, want 404 (no candidate installed): %s", r.Status, r.Body)
	}
	if after := adminDo(t, g, "GET", "/admin/config", ""); string(after.Body) != string(before.Body) {
		t.Errorf("the configuration changed:\nbefore %s\nafter %s", before.Body, after.Body)
	}
	// The limit still counts (nothing reset or removed): 2 of 2, then 429.
	if r := get(t, c, g.url("/api"), nil); r.Status != 200 {
		t.Errorf("second GET /api: %d, want 200", r.Status)
	}
	if r := get(t, c, g.url("/api"), nil); r.Status != 429 {
		t.Errorf("third GET /api: %d %s, want 429 (the limit in force)", r.Status, r.Body)
	}
	// The dashboard's own requests pass: same Origin, a TOML body.
	same := map[string]string{"Origin": "http://" + g.Admin, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/toml"}
	if r, err := tryDo(c, "POST", g.adminURL("/admin/candidate"), same, []byte(attackerConfig)); err != nil || r.Status != 201 {
		t.Fatalf("same-origin TOML POST /admin/candidate: %v %v, want 201", r, err)
	}
	delete(same, "Content-Type")
	if r, err := tryDo(c, "DELETE", g.adminURL("/admin/candidate"), same, nil); err != nil || r.Status != 204 {
		t.Fatalf("same-origin DELETE /admin/candidate: %v %v, want 204", r, err)
	}
}

// TestAdminForeignHost: the admin listener answers 421 to a Host that is
// no IP literal, localhost or admin.allowed_hosts name, on every route
// (reads too: a DNS name rebound to it cannot read the configuration or
// the metrics), and serves the same requests by address, localhost and
// a listed name in any case and with a trailing dot.
func TestAdminForeignHost(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "admin_guard.toml.tmpl", gwOpts{Data: guardData("", `"tollgate-admin.test"`)})
	c := &http.Client{Timeout: 10 * time.Second}
	_, port, _ := net.SplitHostPort(g.Admin)
	for _, path := range []string{"/admin/config", "/admin/ui", "/admin/ui/data", "/metrics", "/healthz", "/readyz", "/debug/pprof/"} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "tollgate-admin.test.evil.example:" + port, "127.0.0.1.nip.io:" + port} {
			r, err := tryDo(c, "GET", g.adminURL(path), map[string]string{"Host": host}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.problem(t, http.StatusMisdirectedRequest)
			if strings.Contains(string(r.Body), "per-client") {
				t.Errorf("GET %s Host %s: the refusal leaks the configuration: %s", path, host, r.Body)
			}
		}
	}
	for _, host := range []string{g.Admin, "localhost:" + port, "LOCALHOST:" + port, "tollgate-admin.test:" + port, "Tollgate-Admin.TEST.:" + port, "[::1]:" + port} {
		r, err := tryDo(c, "GET", g.adminURL("/admin/config"), map[string]string{"Host": host}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 || !strings.Contains(string(r.Body), "per-client") {
			t.Errorf("GET /admin/config Host %s: %d %s, want 200 with the configuration", host, r.Status, r.Body)
		}
	}
}

// TestAdminListenOffLoopback: an admin listener beyond loopback without a
// token is refused by validate and serve (exit 2, naming the token keys
// and admin.insecure) before anything listens; a token makes it valid;
// admin.insecure = true (in the file or as TOLLGATE_ADMIN_INSECURE)
// makes it valid with a loud warning. Nothing here binds beyond loopback:
// serve with admin.insecure is run with its public port taken, so it
// logs its warnings, accepts the configuration and fails to bind the
// public listener before it would open the admin one.
func TestAdminListenOffLoopback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, port, _ := net.SplitHostPort(freePort(t))
	write := func(name, admin, token string, insecure bool) string {
		data := guardData(token, "")
		data["Listen"], data["Admin"], data["Insecure"] = taken.Addr().String(), admin, insecure
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, renderTemplate(t, "admin_guard.toml.tmpl", data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, admin := range []string{"0.0.0.0:" + port, ":" + port, "[::]:" + port} {
		path := write("open.toml", admin, "", false)
		for _, cmd := range [][]string{{"validate", "--config", path}, {"--config", path}} {
			code, stdout, stderr := runGateway(t, nil, cmd...)
			out := stdout + stderr
			if code != 2 {
				t.Errorf("gateway %s with admin_listen %s and no token: exit %d, want 2\n%s", cmd[0], admin, code, out)
			}
			for _, w := range []string{"server.admin_listen", "not a loopback address", "admin.token_env", "admin.token_file", "admin.insecure = true"} {
				if !strings.Contains(out, w) {
					t.Errorf("gateway %s with admin_listen %s: output does not name %q:\n%s", cmd[0], admin, w, out)
				}
			}
			if strings.Contains(out, "tollgate listening") {
				t.Errorf("gateway %s started listening:\n%s", cmd[0], out)
			}
		}
	}
	admin := "0.0.0.0:" + port
	if code, _, stderr := runGateway(t, []string{"TG_GUARD_TOKEN=s3cret"}, "validate", "--config", write("token.toml", admin, "TG_GUARD_TOKEN", false)); code != 0 || strings.Contains(stderr, "admin") {
		t.Errorf("validate with a token: exit %d, want 0 without an admin warning:\n%s", code, stderr)
	}
	// The token variable set but empty is no token: refused.
	if code, _, stderr := runGateway(t, []string{"TG_GUARD_TOKEN="}, "validate", "--config", write("token.toml", admin, "TG_GUARD_TOKEN", false)); code != 2 || !strings.Contains(stderr, "admin.token_env") {
		t.Errorf("validate with an empty token: exit %d, want 2 naming admin.token_env:\n%s", code, stderr)
	}
	insecure := write("insecure.toml", admin, "", true)
	open := write("open.toml", admin, "", false)
	for _, tc := range []struct {
		name, path string
		env        []string
	}{{"admin.insecure = true", insecure, nil}, {"TOLLGATE_ADMIN_INSECURE=true", open, []string{"TOLLGATE_ADMIN_INSECURE=true"}}} {
		code, _, stderr := runGateway(t, tc.env, "validate", "--config", tc.path)
		if code != 0 || !strings.Contains(stderr, "warning: INSECURE: admin.insecure = true and no token: the admin API on "+admin) {
			t.Errorf("validate with %s: exit %d, want 0 with the INSECURE warning:\n%s", tc.name, code, stderr)
		}
		code, _, stderr = runGateway(t, tc.env, "--config", tc.path)
		if code != 1 || !strings.Contains(stderr, "INSECURE: admin.insecure = true and no token") || !strings.Contains(stderr, "server.listen") {
			t.Errorf("serve with %s: exit %d, want the INSECURE warning, then 1 for the taken public port:\n%s", tc.name, code, stderr)
		}
	}
}

// TestAdminLoopbackWithoutTokenWarns: a gateway whose admin listener is on
// loopback without a token starts, warning that any local process may
// change its configuration; with a token it does not warn.
func TestAdminLoopbackWithoutTokenWarns(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "admin_guard.toml.tmpl", gwOpts{Data: guardData("", "")})
	if out := g.outputWith("has no token"); !strings.Contains(out, "the admin API on "+g.Admin+" has no token") || !strings.Contains(out, "admin.token_env") {
		t.Errorf("no warning about the admin API without a token:\n%s", out)
	}
	g2 := startGateway(t, "admin_guard.toml.tmpl", gwOpts{Data: guardData("TG_GUARD_TOKEN", ""), Env: []string{"TG_GUARD_TOKEN=s3cret"}})
	if out := g2.outputWith("tollgate listening"); strings.Contains(out, "has no token") {
		t.Errorf("a warning about a missing token although one is set:\n%s", out)
	}
}

// TestCandidateTakesLiveAdminSettings: a candidate does not use its own
// admin listener settings, so they neither refuse it nor warn: one whose
// [server] names an admin listener beyond loopback without [admin] is
// installed on a gateway whose live file has the token.
func TestCandidateTakesLiveAdminSettings(t *testing.T) {
	t.Parallel()
	const token = "cand-secret"
	g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": "", "Body": candidateBody(10)},
		Env: []string{"TG_CAND_TOKEN=" + token}})
	body := "[server]\nadmin_listen = \"0.0.0.0:9\"\n\n" + candidateBody(4)
	r, err := tryDo(&http.Client{Timeout: 10 * time.Second}, "POST", g.adminURL("/admin/candidate"),
		map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/toml"}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 201 {
		t.Fatalf("POST a candidate with its own admin_listen: %d %s, want 201 (its admin settings are not used)", r.Status, r.Body)
	}
}

// TestAdminCrossSiteReads: with no admin token (the default), another
// site's page cannot make the operator's browser load the admin
// listener's reads either: an <img> of /debug/pprof/goroutine?debug=2
// (a stop-the-world dump of every goroutine), of /debug/pprof/profile or
// /debug/pprof/trace (a CPU profile or an execution trace that runs as
// long as the request, and keeps the operator's own from starting), a
// frame or a fetch of /admin/config, and a preflight get 403 before any
// handler runs. A link the operator follows to the dashboard (a top-level
// navigation), an address typed, the dashboard's own same-origin fetch
// and curl are still served.
func TestAdminCrossSiteReads(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "admin_guard.toml.tmpl", gwOpts{Data: guardData("", "")})
	c := &http.Client{Timeout: 10 * time.Second}
	meta := func(site, mode, dest string) map[string]string {
		return map[string]string{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": dest}
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		want               int
	}{
		{"an <img> of a goroutine dump", "GET", "/debug/pprof/goroutine?debug=2", meta("cross-site", "no-cors", "image"), 403},
		{"an <img> of a CPU profile", "GET", "/debug/pprof/profile?seconds=600", meta("cross-site", "no-cors", "image"), 403},
		{"a <script> of an execution trace", "GET", "/debug/pprof/trace?seconds=600", meta("cross-site", "no-cors", "script"), 403},
		{"a frame of the configuration", "GET", "/admin/config", meta("cross-site", "navigate", "iframe"), 403},
		{"a fetch of the counters", "GET", "/admin/limits?limit=per-client&key=ip:127.0.0.1",
			map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": "http://localhost:1"}, 403},
		{"a preflight", "OPTIONS", "/admin/candidate", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, 403},
		{"a link to the dashboard", "GET", "/admin/ui", meta("cross-site", "navigate", "document"), 200},
		{"an address typed", "GET", "/debug/pprof/goroutine?debug=2", meta("none", "navigate", "document"), 200},
		{"the dashboard's data", "GET", "/admin/ui/data", meta("same-origin", "cors", "empty"), 200},
		{"curl", "GET", "/debug/pprof/goroutine?debug=2", nil, 200},
	} {
		r, err := tryDo(c, tc.method, g.adminURL(tc.path), tc.hdr, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Status != tc.want {
			t.Errorf("%s: %s %s answered %d, want %d: %.200s", tc.name, tc.method, tc.path, r.Status, tc.want, r.Body)
			continue
		}
		if tc.want == 403 {
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%s: Content-Type %q, want a problem body", tc.name, ct)
			}
			if strings.Contains(string(r.Body), "goroutine ") || strings.Contains(string(r.Body), "per-client") {
				t.Errorf("%s: the refusal carries what it refused: %.200s", tc.name, r.Body)
			}
		}
	}
}

// TestAdminTokenChangeWarnsEveryReload: the admin token is read at
// startup, so a reload after the token file changed (a rotation after a
// leak) keeps the old token in force and says so, on that reload and on
// every later one while the file differs from what is in force; a
// reload after the file is put back says nothing. The new token is
// refused and the old one still works throughout.
func TestAdminTokenChangeWarnsEveryReload(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte("token-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "admin_token_file.toml.tmpl", gwOpts{Data: map[string]any{"TokenFile": tokenFile}})
	const warning = "admin or access_log settings changed; they take effect on restart"
	reloads := 0
	reload := func(fileToken string) int {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(fileToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := adminDo(t, g, "POST", "/admin/reload", "token-a"); r.Status != 200 {
			t.Fatalf("reload with the token in force: %s", r)
		}
		reloads++
		// The reload's log lines reach the buffer through a pipe: wait
		// for its "reloaded" line (a hang guard, not a timing).
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(g.output(), "configuration reloaded") < reloads {
			if time.Now().After(deadline) {
				t.Fatalf("reload %d not logged:\n%s", reloads, g.output())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if r := adminDo(t, g, "GET", "/admin/config", fileToken); fileToken != "token-a" && r.Status != 401 {
			t.Errorf("the token in the file (%s) was taken without a restart: %d", fileToken, r.Status)
		}
		return strings.Count(g.output(), warning)
	}
	warned := 0
	for i, step := range []struct {
		file string
		warn bool
	}{
		{"token-b", true},  // the file differs from the token in force
		{"token-b", true},  // still differs: said again
		{"token-a", false}, // back to the token in force: nothing to say
	} {
		n := reload(step.file)
		if got := n > warned; got != step.warn {
			t.Errorf("reload %d (file %s): warned %v, want %v:\n%s", i+1, step.file, got, step.warn, g.output())
		}
		warned = n
	}
}
