package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadRejectsEmptyConfig (issue: an empty or truncated file was
// accepted by SIGHUP and /admin/reload, logged "configuration reloaded
// routes=0", and every request got 404 while /readyz stayed ready): a
// configuration without routes is rejected by SIGHUP, by POST
// /admin/reload and by the file watch, and the old configuration keeps
// serving. The cut files: no bytes, one blank line (which the watch, which
// skips only a zero-byte file, used to swap in), only a comment, and
// truncated after the [server] table (valid TOML, no routes).
func TestReloadRejectsEmptyConfig(t *testing.T) {
	t.Parallel()
	for _, watch := range []bool{false, true} {
		t.Run(map[bool]string{false: "signal-and-admin", true: "watch"}[watch], func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, "empty.toml.tmpl", gwOpts{Data: map[string]any{"Cut": "", "Watch": watch, "Body": "v1"}})
			c := newClient(t, "")
			expect(t, c, g.url("/a"), 200, "v1")
			if watch {
				waitLog(t, g, "watching the configuration file")
			}
			rejected := func(how string, rd *readyzBody) {
				t.Helper()
				if rd.LastReload.OK || !strings.Contains(rd.LastReload.Error, "routes") {
					t.Errorf("%s: reload reported %+v, want a rejection naming routes", how, rd.LastReload)
				}
				expect(t, c, g.url("/a"), 200, "v1")
				if rd := readyz(t, g); !rd.Ready {
					t.Errorf("%s: /readyz not ready after a rejected reload: %+v", how, rd)
				}
			}
			for _, cut := range []string{"empty", "blank", "comments", "server"} {
				data := map[string]any{}
				for k, v := range g.data {
					data[k] = v
				}
				data["Cut"] = cut
				text := renderTemplate(t, g.tmpl, data)
				if cut == "empty" {
					text = nil // not even a newline
				}
				before := time.Now()
				if watch {
					// Written in place, as a truncating editor does.
					if err := os.WriteFile(g.Config, text, 0o600); err != nil {
						t.Fatal(err)
					}
					if cut == "empty" {
						// The watch skips an empty file (a write in
						// progress) and logs it; nothing is reloaded.
						waitLog(t, g, "file empty")
						expect(t, c, g.url("/a"), 200, "v1")
						continue
					}
					rejected(cut+" by the watch", waitReload(t, g, before))
					continue
				}
				writeFileAtomic(t, g.Config, text)
				g.signal(t, syscall.SIGHUP)
				rejected(cut+" by SIGHUP", waitReload(t, g, before))
				r := adminDo(t, g, "POST", "/admin/reload", "")
				if r.Status < 400 || !strings.Contains(string(r.Body), "routes") {
					t.Errorf("%s: POST /admin/reload answered %s, want an error naming routes", cut, r)
				}
				rejected(cut+" by /admin/reload", readyz(t, g))
			}
		})
	}
}

// TestEmptyConfigNeedsAllowEmpty: `gateway validate` refuses a config
// without routes (exit 2, naming routes and the flag) unless
// --allow-empty says it is intended, and so does the server at startup.
func TestEmptyConfigNeedsAllowEmpty(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(path, []byte("# nothing yet\n[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runGateway(t, nil, "validate", "--config", path)
	if code != 2 || !strings.Contains(stderr, "routes") || !strings.Contains(stderr, "--allow-empty") {
		t.Errorf("validate of a config without routes: exit %d, stderr %q; want 2 naming routes and --allow-empty", code, stderr)
	}
	code, stdout, stderr := runGateway(t, nil, "validate", "--allow-empty", "--config", path)
	if code != 0 || !strings.Contains(stdout, "0 routes") {
		t.Errorf("validate --allow-empty: exit %d, stdout %q, stderr %q; want 0 and a summary", code, stdout, stderr)
	}
	code, _, stderr = runGateway(t, nil, "serve", "--config", path)
	if code != 2 || !strings.Contains(stderr, "--allow-empty") {
		t.Errorf("serve of a config without routes: exit %d, stderr %q; want 2 naming --allow-empty", code, stderr)
	}
}

// waitLog waits up to 5 s for the gateway's output to contain s.
func waitLog(t testing.TB, g *gw, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not log %q", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
