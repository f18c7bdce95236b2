package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loggingData is the template data of logging.toml.tmpl.
func loggingData(up *upstream, accessLog string, raw bool) map[string]any {
	return map[string]any{"Upstream": up.URL, "AccessLog": accessLog, "Raw": raw, "Shutdown": "5s"}
}

// accessLines returns the access-log lines (JSON objects with a "route"
// field) among out's lines, decoded.
func accessLines(out string) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["route"] != nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// stopAndRead stops g with SIGTERM (the access log is flushed on exit)
// and returns everything it wrote to stdout and stderr.
func stopAndRead(t *testing.T, g *gw) string {
	t.Helper()
	g.signal(t, syscall.SIGTERM)
	if code, err := g.wait(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	return g.stderr.String()
}

// TestAccessLogStdoutRawClientAndSalt: access_log.path = "stdout" writes one
// JSON line per request to standard output; raw_client = true logs the
// client's IP as it is (API keys stay hashed whatever raw_client says); and
// the hash of one API key depends on salt_env's value only: the same salt
// gives the same hash in two gateways, another salt another hash.
func TestAccessLogStdoutRawClientAndSalt(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	hashOf := func(raw bool, salt string) (keyHash string, ipClient string) {
		g := startGateway(t, "logging.toml.tmpl", gwOpts{Data: loggingData(up, "stdout", raw), Env: []string{"LOG_SALT=" + salt}})
		c := newClient(t, "127.0.0.3")
		get(t, c, g.url("/k"), map[string]string{"X-API-Key": "key-charlie"})
		get(t, c, g.url("/ip"), nil)
		out := stopAndRead(t, g)
		lines := accessLines(out)
		if len(lines) != 2 {
			t.Fatalf("raw_client=%v: %d access-log lines on stdout, want 2:\n%s", raw, len(lines), out)
		}
		if strings.Contains(out, "key-charlie") {
			t.Errorf("raw_client=%v: the raw API key is in the log:\n%s", raw, out)
		}
		k, _ := lines[0]["client"].(string)
		ip, _ := lines[1]["client"].(string)
		return k, ip
	}
	k1, ip1 := hashOf(false, "salt-one")
	k2, _ := hashOf(false, "salt-one")
	k3, _ := hashOf(false, "salt-two")
	kRaw, ipRaw := hashOf(true, "salt-one")
	if k1 == "" || k1 != k2 {
		t.Errorf("one salt, two gateways: API key hashes %q and %q, want equal and non-empty", k1, k2)
	}
	if k1 == k3 {
		t.Errorf("salts salt-one and salt-two give the same API key hash %q", k1)
	}
	if strings.Contains(ip1, "127.0.0.3") || len(ip1) != 16 {
		t.Errorf("raw_client=false: IP client logged as %q, want a 16-character hash", ip1)
	}
	if ipRaw != "127.0.0.3" {
		t.Errorf("raw_client=true: IP client logged as %q, want 127.0.0.3", ipRaw)
	}
	if kRaw != k1 {
		t.Errorf("raw_client=true: API key logged as %q, want the same hash as without it (%q)", kRaw, k1)
	}
}

// TestLogLevelAndFormat: --log-format picks JSON or text lines on stderr and
// --log-level drops the levels below it (the startup line is info).
func TestLogLevelAndFormat(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	for _, tc := range []struct {
		args      []string
		json      bool
		startLine bool // the info-level "tollgate listening" line
	}{
		{nil, true, true},
		{[]string{"--log-format", "text"}, false, true},
		{[]string{"--log-format", "json", "--log-level", "warn"}, true, false},
		{[]string{"--log-format", "text", "--log-level", "error"}, false, false},
	} {
		g := startGateway(t, "logging.toml.tmpl", gwOpts{Data: loggingData(up, "", false), Args: tc.args})
		out := stopAndRead(t, g)
		if got := strings.Contains(out, "tollgate listening"); got != tc.startLine {
			t.Errorf("%v: startup line logged %v, want %v:\n%s", tc.args, got, tc.startLine, out)
		}
		var lines int
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" {
				continue
			}
			lines++
			isJSON := json.Valid([]byte(l))
			isText := strings.HasPrefix(l, "time=") && strings.Contains(l, " level=")
			if tc.json && !isJSON || !tc.json && !isText {
				t.Errorf("%v: line is not %s: %s", tc.args, map[bool]string{true: "JSON", false: "text (time=… level=…)"}[tc.json], l)
			}
		}
		if tc.startLine && lines == 0 {
			t.Errorf("%v: nothing logged", tc.args)
		}
	}
	code, _, stderr := runGateway(t, nil, "--config", "nowhere.toml", "--log-level", "loud")
	if code == 0 || !strings.Contains(stderr, "--log-level") {
		t.Errorf("--log-level loud: exit %d, want non-zero naming --log-level; stderr:\n%s", code, stderr)
	}
}

// TestShutdownTimeoutExpires: a request still in flight when
// server.shutdown_timeout (1 s) has passed after SIGTERM is cut off, and
// the gateway exits (0) soon after the budget, not when the upstream
// (sleeping 30 s) would have answered.
func TestShutdownTimeoutExpires(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	data := loggingData(up, "", false)
	data["Shutdown"] = "1s"
	g := startGateway(t, "logging.toml.tmpl", gwOpts{Data: data})
	c := &http.Client{Timeout: time.Minute}
	res := make(chan error, 1)
	go func() {
		_, err := tryDo(c, "GET", g.url("/long"), map[string]string{hSleep: "30s"}, nil)
		res <- err
	}()
	up.waitArrived(t, 10*time.Second)
	start := time.Now()
	g.signal(t, syscall.SIGTERM)
	code, err := g.wait(20 * time.Second)
	took := time.Since(start)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; want 0", code, err)
	}
	// 1 s budget; the rest is exit work (store, telemetry), bounded by
	// seconds, far below the upstream's 30 s.
	if took < time.Second || took > 10*time.Second {
		t.Errorf("exited %v after SIGTERM with a 1 s shutdown_timeout", took)
	}
	select {
	case err := <-res:
		if err == nil {
			t.Errorf("the in-flight request got a complete answer, want it cut off")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the in-flight request still hangs after the gateway exited")
	}
	if out := g.stderr.String(); !strings.Contains(out, "shutdown deadline passed") {
		t.Errorf("no log line says the deadline passed:\n%s", out)
	}
}
