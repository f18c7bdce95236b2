package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
)

const replayConfig = `
[[limits]]
name = "per-client"
rates = ["2/10s"]
algorithm = "sliding_window_log"

[[limits]]
name = "approx"
rates = ["2/10s"]

[[routes]]
name = "web"
path_prefix = "/"
upstream = "http://127.0.0.1:1"
limits = ["per-client", "approx"]
`

func writeReplayFiles(t *testing.T, f accesslog.Format) (cfg, log string) {
	t.Helper()
	dir := t.TempDir()
	cfg = filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(cfg, []byte(replayConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := accesslog.NewWriter(&buf, accesslog.Options{Format: f})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 5 { // one client, five requests in one second: 2 allowed, 3 denied
		w.Log(&accesslog.Entry{Time: t0.Add(time.Duration(i) * 100 * time.Millisecond), IP: "198.51.100.1",
			Client: "198.51.100.1", ClientKind: "ip", Method: "GET", Path: "/x", Proto: "HTTP/1.1", Status: 200})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("not a log line\n")
	log = filepath.Join(dir, "access.log")
	if err := os.WriteFile(log, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, log
}

func TestReplayCommand(t *testing.T) {
	for _, f := range []accesslog.Format{accesslog.Combined, accesslog.JSONL} {
		t.Run(f.String(), func(t *testing.T) {
			cfg, log := writeReplayFiles(t, f)
			var stdout, stderr bytes.Buffer
			code := run([]string{"replay", "--config", cfg, "--log", log, "--format", f.String()}, nil, &stdout, &stderr)
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			out := stdout.String()
			if !strings.Contains(out, "replayed 5 requests from 6 lines (1 malformed)") {
				t.Errorf("summary missing:\n%s", out)
			}
			var row string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "per-client") {
					row = strings.Join(strings.Fields(l), " ")
				}
			}
			if row != "per-client sliding_window_log enforce 5 2 3 2/2 exact" {
				t.Errorf("per-client row = %q, want 5 requests, 2 allowed, 3 denied, peak 2/2:\n%s", row, out)
			}
			if !strings.Contains(stderr.String(), "line 6: ") {
				t.Errorf("stderr does not report line 6:\n%s", stderr.String())
			}
		})
	}
}

func TestReplayCommandUsage(t *testing.T) {
	cfg, log := writeReplayFiles(t, accesslog.Combined)
	for _, args := range [][]string{
		{"replay", "--config", cfg},
		{"replay", "--config", cfg, "--log", log, "--format", "xml"},
		{"replay", "--config", filepath.Join(t.TempDir(), "missing.toml"), "--log", log},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != exitInvalid {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, exitInvalid, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"replay", "--config", cfg, "--log", log + ".missing"}, nil, &stdout, &stderr); code != exitFailure {
		t.Errorf("missing log: exit %d, want %d", code, exitFailure)
	}
}
