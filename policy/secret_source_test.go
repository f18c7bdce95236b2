package policy

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestSecretFiles reads every secret from a file, the way a Kubernetes
// Secret mounted as files provides them, and checks the mistakes a file
// source allows: both sources set, a missing file, an empty file.
func TestSecretFiles(t *testing.T) {
	files := map[string]string{
		"/s/token":    "admin-token\n",
		"/s/password": "pw\r\n",
		"/s/salt":     "salt  \n",
		"/s/jwt":      strings.Repeat("j", 32) + "\n",
		"/s/keys":     "k1\nk2, k3\n\n",
		"/s/empty":    "\n",
	}
	readFile := func(name string) ([]byte, error) {
		if v, ok := files[name]; ok {
			return []byte(v), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	c := base()
	c.Admin.TokenFile = "/s/token"
	c.Store.Backend, c.Store.Redis.URL, c.Store.Redis.PasswordFile = "redis", "redis://h:6379/0", "/s/password"
	c.AccessLog.Path, c.AccessLog.SaltFile = "stdout", "/s/salt"
	c.Identity.JWT.HS256SecretFile = "/s/jwt"
	c.Limits[0].Exempt.APIKeysFile = "/s/keys"
	p, err := Compile(c, noEnv, readFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ name, got, want string }{
		{"admin token", p.AdminToken.Reveal(), "admin-token"},
		{"redis password", p.Store.Redis.Password.Reveal(), "pw"},
		{"salt", p.AccessLog.Salt.Reveal(), "salt"},
	} {
		if g.got != g.want {
			t.Errorf("%s = %q, want %q (trailing newline and spaces dropped)", g.name, g.got, g.want)
		}
	}
	if p.Identity == nil {
		t.Fatal("JWT from hs256_secret_file: no identity extractor")
	}
	if n := p.Limits[0].ExemptKeys(); n != 3 {
		t.Errorf("exempt keys from a file: %d, want 3 (newline and comma separated)", n)
	}

	for _, tc := range []struct {
		name   string
		mutate func(c *config.Config)
		want   string
	}{
		{"both sources", func(c *config.Config) { c.Admin.TokenEnv, c.Admin.TokenFile = "TOKEN", "/s/token" },
			"admin.token_file: set only one of token_env and token_file"},
		{"missing file", func(c *config.Config) { c.Admin.TokenFile = "/s/nope" },
			"admin.token_file: open /s/nope: file does not exist"},
		{"empty required file", func(c *config.Config) {
			c.Store.Backend, c.Store.Redis.URL, c.Store.Redis.PasswordFile = "redis", "redis://h:6379/0", "/s/empty"
		}, "store.redis.password_file: file /s/empty is empty"},
		{"jwt file and key file", func(c *config.Config) {
			c.Identity.JWT.HS256SecretFile, c.Identity.JWT.RS256PublicKeyFile = "/s/jwt", "/s/key.pem"
		}, "identity.jwt: set only one of hs256_secret_env, hs256_secret_file, rs256_public_key_file, jwks_url and oidc_issuer"},
		{"jwt env and file", func(c *config.Config) {
			c.Identity.JWT.HS256SecretEnv, c.Identity.JWT.HS256SecretFile = "JWT", "/s/jwt"
		},
			"identity.jwt.hs256_secret_file: set only one of hs256_secret_env and hs256_secret_file"},
		{"exempt keys file missing", func(c *config.Config) { c.Limits[0].Exempt.APIKeysFile = "/s/nope" },
			"limits[0].exempt.api_keys_file: open /s/nope"},
		{"blank file name", func(c *config.Config) { c.AccessLog.SaltFile = "  " }, "access_log.salt_file: empty file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			_, err := Compile(c, noEnv, readFile)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile error %v, want one containing %q", err, tc.want)
			}
		})
	}

	// An optional secret's empty file is no error: an empty salt file is
	// the same as no salt, like an empty salt_env variable.
	c = base()
	c.AccessLog.Path, c.AccessLog.SaltFile = "stdout", "/s/empty"
	if _, err := Compile(c, noEnv, readFile); err != nil {
		t.Errorf("empty salt file: %v", err)
	}
}
