package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/childproc"
)

// replayNginxConfig counts clients by IP only, 5 per 10 s.
const replayNginxConfig = `
[identity]
sources = ["ip"]

[[limits]]
name = "per-ip"
rates = ["5/10s"]
algorithm = "sliding_window_log"
by = ["client"]

[[routes]]
name = "api"
path_prefix = "/api"
upstream = "http://127.0.0.1:1"
limits = ["per-ip"]
`

// TestReplayNginxCombined replays a log written by a real nginx 1.22 with
// its default "combined" format (testdata/replay/nginx_combined.log: 20
// requests from 10.0.0.1 and 3 from 10.0.0.2 within two seconds, the
// addresses set by the realip module from X-Forwarded-For, the user agent
// carrying nginx's \x22 escapes, queries in the request line). The lines
// carry no Tollgate fields, so the first field is the client: 5 + 3
// allowed, 15 denied. Counting every line against one anonymous address
// gives 5 and 18.
func TestReplayNginxCombined(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(cfg, []byte(replayNginxConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := runReplay(t, cfg, filepath.Join("testdata", "replay", "nginx_combined.log"), "--format", "combined")
	row := replayRow(t, rep, "per-ip")
	if got, want := strings.Join(row[:6], " "), "per-ip sliding_window_log enforce 23 8 15"; got != want {
		t.Errorf("replay row %q, want %q\n%s", got, want, rep)
	}
	if !strings.Contains(rep, "replayed 23 requests from 23 lines (0 malformed)") {
		t.Errorf("replay did not read every line:\n%s", rep)
	}
}

// runReplay runs `gateway replay --config cfg --log log [args]` and returns
// its report.
func runReplay(t *testing.T, cfg, log string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := childproc.Bind(exec.CommandContext(ctx, gatewayBin, append([]string{"replay", "--config", cfg, "--log", log}, args...)...))
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gateway replay: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// replayRow returns the fields of the report's row for limit.
func replayRow(t *testing.T, report, limit string) []string {
	t.Helper()
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[0] == limit {
			return f
		}
	}
	t.Fatalf("replay report has no row for %s:\n%s", limit, report)
	return nil
}
