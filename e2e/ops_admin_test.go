package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpsAdminReset: GET /admin/limits reports a client's usage
// (used, remaining, reset); DELETE /admin/limits unblocks a locked-out
// client at once — by API key and by IP — and leaves every other client's
// counters as they were.
func TestOpsAdminReset(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up)})
	c := newClient(t, "")
	byIP := newClient(t, "127.0.0.2")
	keyA := map[string]string{"X-API-Key": "key-a"}
	keyB := map[string]string{"X-API-Key": "key-b"}

	for i := 0; i < 3; i++ {
		if r := get(t, c, g.url("/api"), keyA); r.Status != 200 {
			t.Fatalf("key-a request %d: %s", i+1, r)
		}
	}
	get(t, c, g.url("/api"), keyA).problem(t, 429)
	for i := 0; i < 2; i++ {
		if r := get(t, c, g.url("/api"), keyB); r.Status != 200 {
			t.Fatalf("key-b request %d: %s", i+1, r)
		}
	}
	for i := 0; i < 3; i++ {
		if r := get(t, byIP, g.url("/api"), nil); r.Status != 200 {
			t.Fatalf("127.0.0.2 request %d: %s", i+1, r)
		}
	}
	get(t, byIP, g.url("/api"), nil).problem(t, 429)

	u := limitUsage(t, g, "", "per-key", "api_key:key-a")
	if w := u.Windows[0]; u.Limit != "per-key" || u.Mode != "enforce" || w.Limit != 3 || w.Used != 3 || w.Remaining != 0 || w.Reset <= 0 || w.Reset > 60 {
		t.Errorf("usage of key-a: %+v, want per-key enforce, limit 3, used 3, remaining 0, reset in (0, 60]", u)
	}
	if strings.Contains(u.CounterKey, "key-a") {
		t.Errorf("the counter key %q holds the raw API key", u.CounterKey)
	}
	if w := limitUsage(t, g, "", "per-key", "key-b").Windows[0]; w.Used != 2 || w.Remaining != 1 {
		t.Errorf("usage of key-b (bare key): %+v, want used 2, remaining 1", w)
	}
	if w := limitUsage(t, g, "", "per-key", "ip:127.0.0.2").Windows[0]; w.Used != 3 || w.Remaining != 0 {
		t.Errorf("usage of 127.0.0.2: %+v, want used 3, remaining 0", w)
	}
	if w := limitUsage(t, g, "", "per-key", "api_key:never-seen").Windows[0]; w.Used != 0 || w.Remaining != 3 {
		t.Errorf("usage of an unseen key: %+v, want used 0, remaining 3", w)
	}

	// Reset key-a: its next request passes at once; key-b keeps its count.
	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=per-key&key=api_key:key-a", ""); r.Status != 200 {
		t.Fatalf("DELETE /admin/limits: %s", r)
	}
	if r := get(t, c, g.url("/api"), keyA); r.Status != 200 {
		t.Fatalf("key-a right after its reset: %s", r)
	}
	if w := limitUsage(t, g, "", "per-key", "api_key:key-a").Windows[0]; w.Used != 1 || w.Remaining != 2 {
		t.Errorf("usage of key-a after reset and one request: %+v, want used 1, remaining 2", w)
	}
	if w := limitUsage(t, g, "", "per-key", "api_key:key-b").Windows[0]; w.Used != 2 || w.Remaining != 1 {
		t.Errorf("usage of key-b after key-a's reset: %+v, want used 2, remaining 1", w)
	}
	if r := get(t, c, g.url("/api"), keyB); r.Status != 200 {
		t.Fatalf("key-b third request: %s", r)
	}
	get(t, c, g.url("/api"), keyB).problem(t, 429)
	// 127.0.0.2 is still locked out until its own reset.
	get(t, byIP, g.url("/api"), nil).problem(t, 429)
	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=per-key&key=ip:127.0.0.2", ""); r.Status != 200 {
		t.Fatalf("DELETE /admin/limits for an IP: %s", r)
	}
	if r := get(t, byIP, g.url("/api"), nil); r.Status != 200 {
		t.Fatalf("127.0.0.2 right after its reset: %s", r)
	}

	// Mistakes answer with a problem, not a reset.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/admin/limits?limit=nope&key=api_key:key-a", 404},
		{"DELETE", "/admin/limits?limit=nope&key=api_key:key-a", 404},
		{"GET", "/admin/limits?limit=per-key", 400},
		{"GET", "/admin/limits?limit=per-key&key=ip:not-an-ip", 400},
	} {
		if r := adminDo(t, g, tc.method, tc.path, ""); r.Status != tc.status {
			t.Errorf("%s %s: %s, want %d", tc.method, tc.path, r, tc.status)
		}
	}
}

// TestOpsAdminConfigRedacted: GET /admin/config shows the active
// configuration without any secret: neither the JWT key nor the Redis
// password (in the URL or in its environment variable) nor the admin token
// appears.
func TestOpsAdminConfigRedacted(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	const (
		jwtSecret   = "jwt-secret-0123456789abcdef0123456789abcdef"
		urlPassword = "url-password-hunter2"
		envPassword = "env-password-correcthorse"
		token       = "admin-token-4a7d1c"
	)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{
		Data: opsData(t, up, "JWTSecretEnv", "OPS_JWT_SECRET", "TokenEnv", "OPS_ADMIN_TOKEN",
			"RedisURL", "redis://ops:"+urlPassword+"@127.0.0.1:6379/0"),
		Env: []string{"OPS_JWT_SECRET=" + jwtSecret, "OPS_REDIS_PASSWORD=" + envPassword, "OPS_ADMIN_TOKEN=" + token},
	})
	r := adminDo(t, g, "GET", "/admin/config", token)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /admin/config: %s", r)
	}
	body := string(r.Body)
	for _, secret := range []string{jwtSecret, urlPassword, envPassword, token} {
		if strings.Contains(body, secret) {
			t.Errorf("/admin/config shows the secret %q: %s", secret, body)
		}
	}
	for _, want := range []string{`"per-key"`, `"OPS_JWT_SECRET"`, `"OPS_REDIS_PASSWORD"`, "redis://ops:REDACTED@127.0.0.1:6379/0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/admin/config lacks %s: %s", want, body)
		}
	}
	// Neither does the startup log.
	for _, secret := range []string{jwtSecret, urlPassword, envPassword, token} {
		if strings.Contains(g.output(), secret) {
			t.Errorf("the gateway logged the secret %q", secret)
		}
	}
}

// TestOpsAdminToken: with [admin] token_env set,
// /admin/*, /metrics and /debug/pprof answer 401 without the bearer token
// or with a wrong one and 200 with it; the probes need none. On the public
// listener every one of them is 404, token or not.
func TestOpsAdminToken(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	const token = "s3cret-admin-token"
	g := startGateway(t, "ops.toml.tmpl", gwOpts{
		Data: opsData(t, up, "TokenEnv", "OPS_ADMIN_TOKEN"),
		Env:  []string{"OPS_ADMIN_TOKEN=" + token},
	})
	guarded := []struct{ method, path string }{
		{"GET", "/admin/config"},
		{"GET", "/admin/limits?limit=per-key&key=api_key:k"},
		{"DELETE", "/admin/limits?limit=per-key&key=api_key:k"},
		{"POST", "/admin/reload"},
		{"GET", "/admin/overrides"},
		{"GET", "/metrics"},
		{"GET", "/debug/pprof/"},
		{"GET", "/debug/pprof/goroutine?debug=1"},
	}
	for _, rt := range guarded {
		for _, bad := range []string{"", "wrong-token", token + "x"} {
			if r := adminDo(t, g, rt.method, rt.path, bad); r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d, want 401", rt.method, rt.path, bad, r.Status)
			}
		}
		r := adminDo(t, g, rt.method, rt.path, token)
		if r.Status != 200 {
			t.Errorf("%s %s with the token: %s, want 200", rt.method, rt.path, r)
		}
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if r := adminDo(t, g, "GET", probe, ""); r.Status != 200 {
			t.Errorf("GET %s without a token: %s, want 200", probe, r)
		}
	}

	c := newClient(t, "")
	for _, rt := range append(guarded, struct{ method, path string }{"GET", "/healthz"},
		struct{ method, path string }{"GET", "/readyz"}, struct{ method, path string }{"GET", "/debug/pprof/cmdline"}) {
		r := do(t, c, rt.method, g.url(rt.path), map[string]string{"Authorization": "Bearer " + token})
		if r.Status != 404 {
			t.Errorf("public %s %s: %s, want 404", rt.method, rt.path, r)
		}
	}
}

// TestOpsAdminTokenFile: the admin token read from admin.token_file (a
// Kubernetes Secret mounted as a file, ending in a newline) guards the
// admin API like token_env: 401 without it or with a wrong one, 200 with
// it (the newline dropped); the token never shows in the config.
func TestOpsAdminTokenFile(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	const token = "file-admin-token-93b1"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "TokenFile", file)})
	for _, bad := range []string{"", "wrong", token + "x"} {
		if r := adminDo(t, g, "GET", "/admin/config", bad); r.Status != http.StatusUnauthorized {
			t.Errorf("GET /admin/config with token %q: %d, want 401", bad, r.Status)
		}
	}
	r := adminDo(t, g, "GET", "/admin/config", token)
	if r.Status != 200 {
		t.Fatalf("GET /admin/config with the file's token: %s", r)
	}
	if strings.Contains(string(r.Body), token) || !strings.Contains(string(r.Body), file) {
		t.Errorf("/admin/config must show the file's name, not its secret: %s", r.Body)
	}
}
