package e2e

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestReloadNoticesPasswordChange (issue: reload compared store settings
// through their JSON, which leaves the password out, so a changed password
// went unmentioned): a reload that changes only the Redis password (here,
// password_env names another variable) says that store settings take
// effect on restart, and the gateway keeps deciding on its connection.
func TestReloadNoticesPasswordChange(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	// User tg accepts either password, so the gateway decides both before
	// and after the reload.
	if _, err := rs.Do("ACL", "SETUSER", "tg", "on", ">first-secret", ">second-secret", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "redispw.toml.tmpl", gwOpts{
		Data: map[string]any{"Redis": rs.Addr, "PwEnv": "REDIS_PW_A", "Body": "v1"},
		Env:  []string{"REDIS_PW_A=first-secret", "REDIS_PW_B=second-secret"},
	})
	c := newClient(t, "")
	expect(t, c, g.url("/a"), 200, "v1")

	rd := reloadAndWait(t, g, map[string]any{"PwEnv": "REDIS_PW_B", "Body": "v2"})
	if !rd.LastReload.OK {
		t.Fatalf("reload rejected: %+v", rd.LastReload)
	}
	expect(t, c, g.url("/a"), 200, "v2")
	if out := g.output(); !strings.Contains(out, "store settings changed") {
		t.Errorf("a reload that changed the Redis password did not say store settings take effect on restart:\n%s", out)
	}
	if out := g.output(); strings.Contains(out, "second-secret") || strings.Contains(out, "first-secret") {
		t.Errorf("the log shows a password:\n%s", out)
	}
}
