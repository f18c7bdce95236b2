package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

func TestMonotonicClockIgnoresNothingButAdvances(t *testing.T) {
	now := monotonicClock()
	a := now()
	time.Sleep(2 * time.Millisecond)
	b := now()
	if !b.After(a) {
		t.Fatalf("clock did not advance: %v then %v", a, b)
	}
	if d := time.Since(a); d < 0 || d > time.Minute {
		t.Fatalf("clock is not near the wall clock: %v", d)
	}
}

// TestRedisUnreachableAtStartup: by default the gateway
// starts degraded; with store.require_at_startup it refuses to start.
func TestRedisUnreachableAtStartup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String() // nothing will answer here once closed
	ln.Close()
	for _, strict := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "gateway.toml")
		cfg := fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
admin_listen = ""
[store]
backend = "redis"
timeout = "50ms"
require_at_startup = %v
[store.redis]
url = "redis://%s/0"
[[routes]]
name = "demo"
path_prefix = "/"
respond = { status = 200, body = "ok" }
`, strict, dead)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := loadPolicy(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := newGateway(p, path, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if strict {
			if err == nil || !strings.Contains(err.Error(), "require_at_startup") {
				t.Errorf("require_at_startup = true: newGateway error %v, want a refusal naming the setting", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("require_at_startup = false: newGateway: %v (want a degraded start)", err)
		}
		g.publicLn.Close()
		g.shutdown()
	}
}

// TestFailedStartReleasesEverything: when a late step of newGateway fails
// (the listen address is taken), what the earlier steps opened — the access
// log's file, the stores, telemetry — is released, not leaked until the
// process exits. Counted as this process's open file descriptors.
func TestFailedStartReleasesEverything(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.toml")
	cfg := fmt.Sprintf(`
[server]
listen = %q
admin_listen = ""
[access_log]
path = %q
[[routes]]
name = "demo"
respond = { status = 200, body = "ok" }
`, taken.Addr().String(), filepath.Join(dir, "access.log"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := loadPolicy(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	openFiles := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("cannot count open files: %v", err)
		}
		return len(ents)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// One start first, so that lazily opened process-wide files (such as
	// the DNS configuration) are counted in both figures.
	if _, err := newGateway(p, path, nil, log); err == nil {
		t.Fatal("newGateway on a taken address succeeded")
	}
	before := openFiles()
	for range 5 {
		if _, err := newGateway(p, path, nil, log); err == nil || !strings.Contains(err.Error(), "server.listen") {
			t.Fatalf("newGateway on a taken address: %v, want a server.listen error", err)
		}
	}
	if after := openFiles(); after > before {
		t.Errorf("open files went from %d to %d over 5 failed starts: something newGateway opened was not released", before, after)
	}
}

// purgeCounter is a store that counts PurgeDenials, the call by which
// the gateway tells a store with a deny cache that the policy changed.
type purgeCounter struct {
	ratelimit.Store
	purges int
}

func (p *purgeCounter) PurgeDenials() { p.purges++ }

// TestApplyPurgesDenials: making a new policy live (a reload, or a
// promoted candidate) purges the store's cached denials, whether or not a
// limit's ID changed: a limit loosened from 2/hour to 10/hour keeps its ID,
// and a denial cached under 2/hour must not keep answering.
func TestApplyPurgesDenials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.toml")
	write := func(rate string) *policy.Policy {
		t.Helper()
		cfg := fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
admin_listen = ""
[[limits]]
name = "d"
rates = [%q]
algorithm = "fixed_window"
by = ["client"]
[[routes]]
name = "demo"
path_prefix = "/"
respond = { status = 200, body = "ok" }
limits = ["d"]
`, rate)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := loadPolicy(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	g, err := newGateway(write("2/hour"), path, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	pc := &purgeCounter{Store: g.store}
	g.store = pc
	defer func() {
		g.store = pc.Store // closed once, as the gateway opened it
		g.publicLn.Close()
		g.shutdown()
	}()
	g.reloadMu.Lock()
	err = g.apply(write("10/hour"), path)
	g.reloadMu.Unlock()
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if pc.purges != 1 {
		t.Errorf("apply purged the store's cached denials %d times, want 1", pc.purges)
	}
}

// TestCheckAdminBound: an admin listener without a token that the policy
// let through as loopback by name ("localhost") is refused when the name
// bound an address beyond loopback (a hosts file or DNS search list that
// maps localhost elsewhere); a token or admin.insecure lets it be.
func TestCheckAdminBound(t *testing.T) {
	dir := t.TempDir()
	load := func(admin string, env []string) *policy.Policy {
		t.Helper()
		path := filepath.Join(dir, "gateway.toml")
		cfg := fmt.Sprintf("[server]\nadmin_listen = \"localhost:0\"\n%s\n[[routes]]\nname = \"demo\"\nrespond = { status = 200, body = \"ok\" }\n", admin)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := loadPolicy(path, env)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := load("", nil)
	token := load("[admin]\ntoken_env = \"TG_T\"", []string{"TG_T=s3cret"})
	insecure := load("[admin]\ninsecure = true", nil)
	for _, tc := range []struct {
		name string
		p    *policy.Policy
		ip   string
		ok   bool
	}{
		{"127.0.0.1", open, "127.0.0.1", true},
		{"127.0.1.1 (Debian's hostname line)", open, "127.0.1.1", true},
		{"::1", open, "::1", true},
		{"IPv4-mapped loopback", open, "::ffff:127.0.0.1", true},
		{"a LAN address", open, "10.1.2.3", false},
		{"every interface", open, "0.0.0.0", false},
		{"every interface, IPv6", open, "::", false},
		{"a LAN address with a token", token, "10.1.2.3", true},
		{"a LAN address, admin.insecure", insecure, "10.1.2.3", true},
	} {
		err := checkAdminBound(&net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 9090}, tc.p)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "server.admin_listen") || !strings.Contains(err.Error(), "not a loopback address")) {
			t.Errorf("%s: %v does not name server.admin_listen and why", tc.name, err)
		}
	}
}
