package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayTestCommand: `gateway test` passes the shipped cases file
// against the shipped gateway.toml (exit 0), catches a deliberately wrong
// expectation with a diff naming the case, step, request and both values
// (exit 1), and reports a bad cases file with field paths (exit 2).
func TestGatewayTestCommand(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "gateway.toml")

	code, stdout, stderr := runGateway(t, nil, "test", "--config", config, filepath.Join(root, "gateway.cases.toml"))
	if code != 0 || !strings.Contains(stdout, "PASS: 4 cases, 4 passed") {
		t.Fatalf("shipped cases: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong.toml")
	// The sixth request within 10 s is denied, not allowed; and
	// Retry-After is 12, not 10.
	writeCases(t, wrong, `
[[cases]]
name = "expects too much"
  [[cases.steps]]
  at = "0s"
  request = { path = "/demo", headers = { "X-API-Key" = "k" }, count = 6 }
  expect = { status = 200, retry_after = 10 }
`)
	code, stdout, stderr = runGateway(t, nil, "test", "--config", config, wrong)
	wantDiff := `FAIL "expects too much" step 1 (at 0s, GET /demo ×6):
    request 6 of 6: status: want 200, got 429 (rate limit "per-client" exceeded; retry in 12s)
    request 6 of 6: Retry-After: want "10", got "12"
FAIL: 1 cases, 0 passed, 1 failing steps, 6 requests
`
	if code != 1 || !strings.Contains(stdout, wantDiff) {
		t.Fatalf("wrong expectation: exit %d, want 1 and the diff\n%s\nstdout:\n%s\nstderr:\n%s", code, wantDiff, stdout, stderr)
	}

	bad := filepath.Join(dir, "bad.toml")
	writeCases(t, bad, `
[[cases]]
name = "broken"
  [[cases.steps]]
  at = "-1s"
  request = { path = "demo", count = 0 }
  expect = { status = [200, 700] }
`)
	code, stdout, stderr = runGateway(t, nil, "test", "--config", config, bad)
	for _, want := range []string{
		`cases[0].steps[0].at: want a duration ≥ 0`,
		`cases[0].steps[0].request.path: want a path starting with /, got "demo"`,
		`cases[0].steps[0].expect.status: 2 statuses for 1 requests`,
		`cases[0].steps[0].expect.status[1]: want an HTTP status 100..599, got 700`,
	} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("bad cases file: exit %d, want 2 and %q in\n%s%s", code, want, stderr, stdout)
		}
	}
}

func writeCases(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// offlineConfig names every secret a serving gateway reads from the
// environment; none is set where the offline commands run.
const offlineConfig = `[admin]
token_env = "TG_OFFLINE_ADMIN_TOKEN"

[store]
backend = "redis"

[store.redis]
url = "redis://127.0.0.1:1/0"
password_env = "TG_OFFLINE_REDIS_PASSWORD"

[access_log]
salt_env = "TG_OFFLINE_SALT"

[[limits]]
name = "per-client"
algorithm = "sliding_window_log"
rates = ["2/minute"]
by = ["client"]
exempt = { api_keys_env = "TG_OFFLINE_EXEMPT" }

[[routes]]
name = "api"
path_prefix = "/api"
respond = { status = 200, body = "ok" }
limits = ["per-client"]
`

// TestOfflineCommandsNeedNoServingSecrets: `gateway test` and `gateway
// replay` decide on a memory store of their own and serve nothing, so
// they run where the admin token and the Redis password are not set
// (they refused to before); a secret that changes decisions, a JWT key
// named but unset, is still required.
func TestOfflineCommandsNeedNoServingSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.toml")
	cases := filepath.Join(dir, "gateway.cases.toml")
	logf := filepath.Join(dir, "access.jsonl")
	for p, s := range map[string]string{
		cfg: offlineConfig,
		cases: `[[cases]]
name = "two a minute"
  [[cases.steps]]
  at = "0s"
  request = { path = "/api/x", headers = { "X-API-Key" = "k" }, count = 3 }
  expect = { status = [200, 200, 429] }
`,
		logf: `{"time":"2026-01-01T00:00:00Z","method":"GET","path":"/api/x","status":200,"client":"k"}` + "\n",
	} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, stderr := runGateway(t, nil, "test", "--config", cfg, cases); code != 0 || !strings.Contains(stdout, "PASS") {
		t.Errorf("gateway test without serving secrets: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runGateway(t, nil, "replay", "--config", cfg, "--log", logf); code != 0 || !strings.Contains(stdout, "replayed 1 requests") {
		t.Errorf("gateway replay without serving secrets: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// serve and validate still require them.
	if code, _, stderr := runGateway(t, nil, "validate", "--config", cfg); code != 2 || !strings.Contains(stderr, "admin.token_env") {
		t.Errorf("validate without the admin token: exit %d\n%s", code, stderr)
	}
	jwt := offlineConfig + "\n[identity.jwt]\nhs256_secret_env = \"TG_OFFLINE_JWT\"\n"
	if err := os.WriteFile(cfg, []byte(jwt), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runGateway(t, nil, "test", "--config", cfg, cases); code != 2 || !strings.Contains(stderr, "identity.jwt.hs256_secret_env") {
		t.Errorf("gateway test without the JWT key it verifies tokens with: exit %d\n%s", code, stderr)
	}
}
