package e2e

import (
	"os"
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

// TestSecretVariableNamedBySettingNotWarned: a secret held in a variable
// that a *_env setting names may carry the TOLLGATE_ prefix (the example
// configuration suggests token_env = "TOLLGATE_ADMIN_TOKEN"); validate and
// serve must not call it an unknown configuration key, while a variable
// nothing names is still warned about.
func TestSecretVariableNamedBySettingNotWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.toml")
	conf := `[server]
listen = "127.0.0.1:0"
admin_listen = ""
[admin]
token_env = "TOLLGATE_ADMIN_TOKEN"
[access_log]
salt_env = "TOLLGATE_LOG_SALT"
[[routes]]
name = "r"
path_prefix = "/"
respond = { status = 200 }
`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TOLLGATE_ADMIN_TOKEN=s3cret-token-value", "TOLLGATE_LOG_SALT=pepper", "TOLLGATE_STORE_BAKCEND=redis"}
	code, _, stderr := runGateway(t, env, "validate", "--config", path)
	if code != 0 {
		t.Fatalf("validate: exit %d, stderr %q", code, stderr)
	}
	for _, v := range []string{"TOLLGATE_ADMIN_TOKEN ", "TOLLGATE_LOG_SALT "} {
		if strings.Contains(stderr, v) {
			t.Errorf("validate warned about %s, which a setting names: %q", v, stderr)
		}
	}
	if !strings.Contains(stderr, "TOLLGATE_STORE_BAKCEND names no configuration key") {
		t.Errorf("validate did not warn about a variable nothing names: %q", stderr)
	}
}
