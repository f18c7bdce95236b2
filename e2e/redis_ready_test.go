package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// refusingRedis is a Redis that answers PING but refuses every decision,
// with the cause the gateway must name.
type refusingRedis struct {
	name  string
	start func(t *testing.T) string // returns the URL's authority (user:pw@host:port)
	cause string
}

func refusingRedises() []refusingRedis {
	return []refusingRedis{
		{"replica", func(t *testing.T) string {
			return redistest.Replica(t, redistest.Standalone(t)).Addr
		}, "READONLY: the configured Redis is a replica"},
		{"acl-user-without-scripts-or-functions", func(t *testing.T) string {
			rs := redistest.Standalone(t)
			if _, err := rs.Do("ACL", "SETUSER", "tg", "on", ">pw", "~*", "+@all", "-evalsha", "-eval", "-function", "-fcall"); err != nil {
				t.Fatal(err)
			}
			return "tg:pw@" + rs.Addr
		}, "NOPERM: user tg may not run evalsha"},
		{"acl-user-without-fcall", func(t *testing.T) string {
			rs := redistest.Standalone(t)
			if _, err := rs.Do("ACL", "SETUSER", "tg", "on", ">pw", "~*", "+@all", "-fcall"); err != nil {
				t.Fatal(err)
			}
			return "tg:pw@" + rs.Addr
		}, "NOPERM: user tg may not run fcall"},
		{"evalsha-and-function-renamed", func(t *testing.T) string {
			return redistest.StandaloneConfig(t, "rename-command EVALSHA \"\"\nrename-command FUNCTION \"\"\n").Addr
		}, "EVALSHA is renamed or disabled"},
	}
}

// TestRedisRequireAtStartupNamesRefusal: with store.require_at_startup, a
// gateway whose Redis answers PING but refuses the decision script (a
// replica, an ACL user without EVALSHA/EVAL and FUNCTION/FCALL, or without
// FCALL, EVALSHA and FUNCTION renamed away) exits 1
// with a message naming the cause, instead of starting to fail every
// decision.
func TestRedisRequireAtStartupNamesRefusal(t *testing.T) {
	t.Parallel()
	for _, rr := range refusingRedises() {
		t.Run(rr.name, func(t *testing.T) {
			t.Parallel()
			data := redisData(rr.start(t), nil, "deny", "100ms",
				limitTOML("l", "5/minute", "fixed_window", "client")+routeTOML("r", "/", "l"))
			data["StoreExtra"] = "require_at_startup = true"
			data["Listen"], data["Admin"] = listenAndAdmin(t)
			path := filepath.Join(t.TempDir(), "gateway.toml")
			if err := os.WriteFile(path, renderTemplate(t, "redis.toml.tmpl", data), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runGateway(t, nil, "--config", path)
			out := stdout + stderr
			if code != 1 || !strings.Contains(out, rr.cause) || !strings.Contains(out, "require_at_startup") {
				t.Fatalf("exit %d, want 1 with a message naming %q and require_at_startup; output:\n%s", code, rr.cause, out)
			}
		})
	}
}

// TestRedisReadyzNamesRefusal: without require_at_startup, the same
// gateways start, but /readyz answers 503 with the cause in its JSON (even
// with on_error = "local", since no waiting heals a configuration error),
// and the log names the cause once, not once per probe.
func TestRedisReadyzNamesRefusal(t *testing.T) {
	t.Parallel()
	for _, rr := range refusingRedises() {
		t.Run(rr.name, func(t *testing.T) {
			t.Parallel()
			data := redisData(rr.start(t), nil, "local", "100ms",
				limitTOML("l", "5/minute", "fixed_window", "client")+routeTOML("r", "/", "l"))
			g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
			for i := 0; i < 5; i++ {
				rd := readyz(t, g)
				if rd.status != 503 || rd.Ready || !strings.Contains(rd.StoreError, rr.cause) {
					t.Fatalf("probe %d: /readyz %d ready=%v store_error %q, want 503 naming %q",
						i, rd.status, rd.Ready, rd.StoreError, rr.cause)
				}
			}
			if n := strings.Count(g.output(), "cannot make a decision"); n != 1 {
				t.Errorf("the cause was logged %d times over startup and 5 probes, want once; log:\n%s", n, g.output())
			}
		})
	}
}
