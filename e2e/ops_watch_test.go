package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpsWatchConfig: with server.watch_config = true the
// gateway reloads by itself when the file changes — written in place,
// renamed over, in a storm of three quick writes, and as a Kubernetes
// ConfigMap whose ..data symlink is swapped — and the final state always
// equals the final file; an invalid write is rejected and the old config
// keeps serving; an unchanged limit keeps its count throughout.
func TestOpsWatchConfig(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Watch", true)})
	c := newClient(t, "")
	sticky := map[string]string{"X-API-Key": "watched"}
	expect2(t, c, g.url("/sticky"), sticky, 200)
	expect2(t, c, g.url("/sticky"), sticky, 200)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.output(), "watching the configuration file") {
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not log that it watches its configuration")
		}
		time.Sleep(20 * time.Millisecond)
	}

	render := func(body string) []byte {
		d := map[string]any{}
		for k, v := range g.data {
			d[k] = v
		}
		d["Body"] = body
		return renderTemplate(t, g.tmpl, d)
	}

	// Rename over the file (the harness writes by rename).
	g.rewrite(t, map[string]any{"Body": "renamed"})
	waitBody(t, c, g.url("/shadow"), "renamed")

	// Write in place.
	if err := os.WriteFile(g.Config, render("in-place"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitBody(t, c, g.url("/shadow"), "in-place")

	// A storm of three writes: the last one wins.
	for i, body := range []string{"storm-1", "storm-2", "storm-3"} {
		if i == 1 {
			if err := os.WriteFile(g.Config, render(body), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFileAtomic(t, g.Config, render(body))
	}
	waitBody(t, c, g.url("/shadow"), "storm-3")

	// An invalid write is rejected; the old config serves.
	g.rewrite(t, map[string]any{"Body": "bad", "Rate": "3/fortnight"})
	deadline = time.Now().Add(10 * time.Second)
	for {
		rd := readyz(t, g)
		if !rd.LastReload.OK && strings.Contains(rd.LastReload.Error, "fortnight") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never showed the invalid write rejected: %+v", rd.LastReload)
		}
		time.Sleep(20 * time.Millisecond)
	}
	expect(t, c, g.url("/shadow"), 200, "storm-3")

	// Become a ConfigMap mount: gateway.toml -> ..data/gateway.toml,
	// ..data -> ..v1; then swap ..data to ..v2.
	dir := filepath.Dir(g.Config)
	version := func(name, body string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "gateway.toml"), render(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	symlinkOver := func(target, link string) {
		tmp := link + ".tmp-link"
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, link); err != nil {
			t.Fatal(err)
		}
	}
	g.data["Rate"] = "3/minute"
	version("..v1", "configmap-1")
	symlinkOver("..v1", filepath.Join(dir, "..data"))
	symlinkOver(filepath.Join("..data", "gateway.toml"), g.Config)
	waitBody(t, c, g.url("/shadow"), "configmap-1")
	version("..v2", "configmap-2")
	symlinkOver("..v2", filepath.Join(dir, "..data"))
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	waitBody(t, c, g.url("/shadow"), "configmap-2")
	if rd := readyz(t, g); !rd.LastReload.OK {
		t.Errorf("/readyz after the ConfigMap swap: %+v", rd.LastReload)
	}

	// sticky never changed: 2 of 5 still counted.
	if w := limitUsage(t, g, "", "sticky", "api_key:watched").Windows[0]; w.Used != 2 {
		t.Errorf("sticky after the watched reloads: %+v, want used 2", w)
	}
	m := scrape(t, g, "")
	if n := m[`tollgate_config_reloads_total{tollgate_result="success"}`]; n < 5 {
		t.Errorf("%v successful reloads counted, want at least 5:%s", n, m.family("tollgate_config_reloads_total"))
	}
	if n := m[`tollgate_config_reloads_total{tollgate_result="failure"}`]; n < 1 {
		t.Errorf("the invalid write was not counted as a failed reload:%s", m.family("tollgate_config_reloads_total"))
	}
}
