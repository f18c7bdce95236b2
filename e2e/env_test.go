package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUnknownEnvWarns (issue: the example config told users to set
// TOLLGATE_STORE_REDIS_PASSWORD, which is no key, and unknown TOLLGATE_*
// variables were ignored in silence): a TOLLGATE_* variable that names no
// key is reported as a warning with the name probably meant, by validate
// (which still exits 0 for a valid file) and by the server at startup
// (which still starts).
func TestUnknownEnvWarns(t *testing.T) {
	t.Parallel()
	env := []string{"TOLLGATE_STORE_REDIS_PASSWORD=hunter2", "TOLLGATE_SERVER_LISTN=0.0.0.0:1"}
	want := []string{
		"TOLLGATE_STORE_REDIS_PASSWORD names no configuration key",
		"did you mean TOLLGATE_STORE_REDIS_PASSWORD_ENV?",
		"TOLLGATE_SERVER_LISTN names no configuration key",
		"did you mean TOLLGATE_SERVER_LISTEN?",
	}
	code, _, stderr := runGateway(t, env, "validate", "--config", filepath.Join("testdata", "validate", "valid.toml"))
	if code != 0 {
		t.Errorf("validate with unknown TOLLGATE_* variables: exit %d, want 0 (a warning, not an error); stderr:\n%s", code, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("validate: stderr does not say %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "hunter2") {
		t.Errorf("validate printed the variable's value:\n%s", stderr)
	}

	g := startGateway(t, "reload.toml.tmpl", gwOpts{Data: reloadData(), Env: env})
	out := g.output()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("serve: the log does not say %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("serve logged the variable's value:\n%s", out)
	}
}
