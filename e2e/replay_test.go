package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// The mixed traffic of TestReplayMatchesLive: 6 s of requests from each
// client, a pause of 400 ms after each, every fourth held 1 s by the
// upstream. Offered ≈ 1.3× the limit, so admissions spread over the
// windows and slow admitted requests straddle their edges.
var mixedDuration, mixedPause, mixedSlow = 6 * time.Second, 400 * time.Millisecond, "1s"

// replayAlgorithms are the algorithms replay reproduces. A concurrency
// limit is left out: replay serves each request at once (its slot is
// released before the next line), so it never binds in a replay.
var replayAlgorithms = []string{"fixed_window", "fixed_window_elastic", "sliding_window_log",
	"sliding_window_counter", "token_bucket", "gcra"}

// TestReplayMatchesLive: live traffic with slow and fast requests mixed on
// one key per limit (12 clients from one address, every fourth request
// held 1 s by the upstream, 30/2s), through the real gateway writing its
// access log; then `gateway replay` of that log must allow what live
// allowed (as the clients saw it), within one decision, for every
// algorithm and in both formats. The log is written at each request's
// finish and stamped with its start, so the slow requests' lines come
// after lines that started later: replay in file order let time run back
// and allowed 3 to 8 fewer than live (fixed_window, sliding_window_log,
// sliding_window_counter, gcra).
func TestReplayMatchesLive(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"jsonl", "combined"} {
		t.Run(format, func(t *testing.T) {
			g, logPath := startReplayGateway(t, format, "30/2s", replayAlgorithms, "")
			live := driveMixed(t, g, replayAlgorithms, 12, mixedDuration, mixedPause)
			t.Logf("live allowed: %v", live)
			if n := logInversions(t, flushLog(t, g, logPath)); n == 0 {
				t.Fatalf("no line of the log starts before the line above it: the test did not mix slow and fast requests")
			} else {
				t.Logf("%d lines start before the line above them", n)
			}
			rep := runReplay(t, g.Config, logPath, "--format", format)
			t.Logf("replay:\n%s", rep)
			for _, alg := range replayAlgorithms {
				row := replayRow(t, rep, alg)
				allowed, err := strconv.Atoi(row[4])
				if err != nil {
					t.Fatalf("%s: allowed %q: %v", alg, row[4], err)
				}
				if d := allowed - live[alg]; d < -1 || d > 1 {
					t.Errorf("%s: replay allowed %d, live %d (want within one)", alg, allowed, live[alg])
				}
			}
		})
	}
}

// driveMixed sends, for each route in routes, n clients' requests from
// 127.0.0.1 for d, every fourth held mixedSlow by the upstream, each
// client pausing between requests. It returns the 200s per route as the
// clients saw them; any status but 200 and 429 fails the test.
func driveMixed(t *testing.T, g *gw, routes []string, n int, d, pause time.Duration) map[string]int {
	t.Helper()
	var mu sync.Mutex
	allowed := map[string]int{}
	var failures []string
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for _, route := range routes {
		for k := range n {
			c := newClient(t, "")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					var hdr map[string]string
					if (i+k)%4 == 0 {
						hdr = map[string]string{hSleep: mixedSlow}
					}
					r, err := tryDo(c, http.MethodGet, g.url("/"+route+"/x"), hdr, nil)
					mu.Lock()
					switch {
					case err != nil:
						failures = append(failures, err.Error())
					case r.Status == http.StatusOK:
						allowed[route]++
					case r.Status != http.StatusTooManyRequests:
						failures = append(failures, r.String())
					}
					mu.Unlock()
					time.Sleep(pause)
				}
			}()
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, first: %s", len(failures), failures[0])
	}
	return allowed
}

// logInversions counts the lines of an access log stamped earlier than the
// line before them, reading the time of either format.
func logInversions(t *testing.T, data []byte) int {
	t.Helper()
	var prev time.Time
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var at time.Time
		var err error
		if strings.HasPrefix(line, "{") {
			var j struct{ Time time.Time }
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			at = j.Time
		} else {
			_, rest, _ := strings.Cut(line, "[")
			ts, _, _ := strings.Cut(rest, "]")
			if at, err = time.Parse("02/Jan/2006:15:04:05.000000 -0700", ts); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
		}
		if at.Before(prev) {
			n++
		}
		prev = at
	}
	return n
}

// TestReplayIPv6Prefix: a client rotating its IPv6 address inside one /64
// (twelve addresses, sent through a trusted proxy's X-Forwarded-For) is
// one client live (5 of 12 allowed by 5/minute), and must be one client
// in the replay of the hashed access log too. Hashing each address whole
// made it twelve clients in the replay: 12 allowed.
func TestReplayIPv6Prefix(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"jsonl", "combined"} {
		t.Run(format, func(t *testing.T) {
			g, logPath := startReplayGateway(t, format, "5/minute", []string{"sliding_window_log"}, "127.0.0.1/32")
			c := newClient(t, "")
			live := statuses{}
			for i := 1; i <= 12; i++ {
				xff := fmt.Sprintf("2001:db8:7:9:%x::%x", i*17, i) // one /64, twelve addresses
				live[get(t, c, g.url("/sliding_window_log/x"), map[string]string{"X-Forwarded-For": xff}).Status]++
			}
			if live[200] != 5 || live[429] != 7 {
				t.Fatalf("live statuses %v, want 5×200, 7×429 (one client per /64)", live)
			}
			if data := flushLog(t, g, logPath); bytes.Contains(data, []byte("2001:db8")) {
				t.Fatalf("the hashed access log holds a raw address:\n%s", data)
			}
			rep := runReplay(t, g.Config, logPath, "--format", format)
			row := replayRow(t, rep, "sliding_window_log")
			if got, want := strings.Join(row[:6], " "), "sliding_window_log sliding_window_log enforce 12 5 7"; got != want {
				t.Errorf("replay row %q, want %q (live: 5 allowed, 7 denied)\n%s", got, want, rep)
			}
		})
	}
}

// startReplayGateway starts a gateway on replay.toml.tmpl: one route and
// limit per algorithm of rate, an access log in format (hashed, salted),
// trusting the proxy prefix trusted ("" for none). It returns the gateway
// and the log's path.
func startReplayGateway(t *testing.T, format, rate string, algorithms []string, trusted string) (*gw, string) {
	t.Helper()
	up := newUpstream(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, "replay.toml.tmpl", gwOpts{
		Data: map[string]any{"Rate": rate, "Format": format, "AccessLog": logPath,
			"Upstream": up.URL, "Algorithms": algorithms, "Trusted": trusted},
		Env: []string{"REPLAY_LOG_SALT=pepper"},
	})
	return g, logPath
}

// flushLog stops g with SIGTERM, which flushes its access log, checks
// that it exits 0, and returns the log at path.
func flushLog(t *testing.T, g *gw, path string) []byte {
	t.Helper()
	g.signal(t, syscall.SIGTERM)
	if code, err := g.wait(10 * time.Second); err != nil || code != 0 {
		t.Fatalf("gateway exit %d, %v", code, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
