package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/childproc"
)

// runGateway runs the binary to completion (bounded) and returns its exit
// code, stdout and stderr.
func runGateway(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := childproc.Bind(exec.CommandContext(ctx, gatewayBin, args...))
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gateway %s did not finish within 30s", strings.Join(args, " "))
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("gateway %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// TestValidate: `gateway validate` exits 0 with a summary for a valid file,
// and 2 with every problem and its field path for a broken one.
func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		code int
		// want are substrings of stderr, one or more per problem.
		want []string
	}{
		{"valid.toml", 0, nil},
		{"unknown-algorithm.toml", 2, []string{"limits[0].algorithm", "leaky_bucket"}},
		{"bad-rate-unit.toml", 2, []string{"limits[0].rates[0]", "10/fortnight"}},
		{"unknown-limit.toml", 2, []string{`routes[0].limits[1]: unknown limit "serch"`}},
		{"bad-cidr.toml", 2, []string{"identity.trusted_proxies[1]", "10.0.0.0/33"}},
		{"duplicate-route.toml", 2, []string{"routes[1].name", `"api"`}},
		{"upstream-no-scheme.toml", 2, []string{"routes[0].upstream", "127.0.0.1:9000"}},
		{"unknown-key.toml", 2, []string{"listne"}},
		{"bad-numbers.toml", 2, []string{"limits[0].rates[0]", "limits[1].rates[0]", "limits[2].rates[0]", "limits[3].rates[0]"}},
		{"many-problems.toml", 2, []string{"identity.trusted_proxies[0]", "limits[0].rates[0]", "limits[0].algorithm",
			"routes[0].upstream", `routes[0].limits[0]: unknown limit "serch"`, "routes[1].name"}},
		{"not-toml.toml", 2, []string{"not-toml.toml"}},
		// Every stage in one run: unknown key, wrong type, meaning.
		{"stages.toml", 2, []string{`server.listne: unknown key (did you mean "listen"?)`,
			"limits[0].cost: expected an integer, got 1.5", "server.idle_timeout: must not be negative, got -1s"}},
		{"does-not-exist.toml", 2, []string{"does-not-exist.toml"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", "validate", tc.file)
			code, stdout, stderr := runGateway(t, nil, "validate", "--config", path)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if tc.code == 0 && strings.TrimSpace(stdout) == "" {
				t.Errorf("validate of a valid file printed no summary (stderr: %s)", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
			if tc.file == "stages.toml" && strings.Contains(stderr, "precision") {
				t.Errorf(`precision = "1d" was refused:\n%s`, stderr)
			}
		})
	}
}

// TestServeRefusesInvalidConfig: serving a broken file exits non-zero
// at once and explains why; it never serves.
func TestServeRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	code, _, stderr := runGateway(t, nil, "--config", filepath.Join("testdata", "validate", "unknown-limit.toml"))
	if code == 0 {
		t.Errorf("gateway served an invalid configuration (exit 0)")
	}
	if !strings.Contains(stderr, "serch") {
		t.Errorf("stderr does not name the problem:\n%s", stderr)
	}
}

// TestVersion: `gateway version` exits 0 and prints a version line.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runGateway(t, nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "gateway ") {
		t.Errorf("gateway version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestEnvOverride: TOLLGATE_* variables override config keys:
// TOLLGATE_SERVER_LISTEN moves the public listener, and a bad
// TOLLGATE_STORE_BACKEND is reported like a bad file.
func TestEnvOverride(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "headers.toml.tmpl", gwOpts{
		Data: map[string]any{"Emit": `["ietf"]`, "Rates": `["3/minute"]`, "Algorithm": "sliding_window_log",
			"Upstream": up.URL},
		ListenFromEnv: "TOLLGATE_SERVER_LISTEN",
	})
	c := newClient(t, "")
	r := get(t, c, g.url("/api"), nil)
	if r.Status != 200 {
		t.Fatalf("on the TOLLGATE_SERVER_LISTEN address %s: %s", g.Listen, r)
	}
	// The file's own listen address is not served.
	fileAddr := g.data["Listen"].(string)
	if _, err := tryDo(&http.Client{Timeout: 2 * time.Second}, "GET", "http://"+fileAddr+"/api", nil, nil); err == nil {
		t.Errorf("the gateway also serves the file's listen address %s", fileAddr)
	}

	g2 := startGateway(t, "headers.toml.tmpl", gwOpts{
		Data: map[string]any{"Emit": `["ietf"]`, "Rates": `["3/minute"]`, "Algorithm": "sliding_window_log",
			"Upstream": up.URL},
		Env: []string{"TOLLGATE_SERVER_SHUTDOWN_TIMEOUT=3s", "TOLLGATE_STORE_MEMORY_MAX_KEYS=1000"},
	})
	if r := get(t, c, g2.url("/api"), nil); r.Status != 200 {
		t.Errorf("with TOLLGATE_SERVER_SHUTDOWN_TIMEOUT and TOLLGATE_STORE_MEMORY_MAX_KEYS set: %s", r)
	}
	code, _, stderr := runGateway(t, []string{"TOLLGATE_STORE_BACKEND=carrier-pigeon"}, "validate", "--config", filepath.Join("testdata", "validate", "valid.toml"))
	if code != 2 || !strings.Contains(stderr, "carrier-pigeon") {
		t.Errorf("TOLLGATE_STORE_BACKEND=carrier-pigeon: exit %d, stderr %q; want 2 naming the value", code, stderr)
	}
}
