package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestAdminListenNeedsToken: an admin listener beyond loopback without a
// token is refused, naming the token keys and admin.insecure; a loopback
// address, a token or admin.insecure makes it valid.
func TestAdminListenNeedsToken(t *testing.T) {
	const refused = `server.admin_listen: "%s" is not a loopback address and the admin API has no token`
	tok := func(c *config.Config) { c.Admin.TokenEnv = "ADMIN_TOKEN" }
	var cases []problemCase
	for _, addr := range []string{"0.0.0.0:9090", ":9090", "[::]:9090", "10.0.0.5:9090", "admin.example:9090", "localhost.example:9090", "128.0.0.1:9090"} {
		cases = append(cases,
			problemCase{"no token " + addr, func(c *config.Config) { c.Server.AdminListen = addr }, []string{strings.Replace(refused, "%s", addr, 1)}},
			problemCase{"token " + addr, func(c *config.Config) { c.Server.AdminListen = addr; tok(c) }, nil},
			problemCase{"insecure " + addr, func(c *config.Config) { c.Server.AdminListen = addr; c.Admin.Insecure = true }, nil},
		)
	}
	for _, addr := range []string{"127.0.0.1:9090", "127.9.9.9:1", "[::1]:9090", "[::ffff:127.0.0.1]:9090", "localhost:9090", "LOCALHOST.:9090", ""} {
		cases = append(cases, problemCase{"loopback " + addr, func(c *config.Config) { c.Server.AdminListen = addr }, nil})
	}
	testProblems(t, base, cases)

	c := base()
	c.Server.AdminListen = "0.0.0.0:9090"
	err := validate(&c)
	for _, w := range []string{"admin.token_env", "admin.token_file", "admin.insecure = true"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not name %s: %v", w, err)
		}
	}
}

// TestAdminWarnings: each admin listener without a token gets one warning
// (a loud one when admin.insecure lets it off loopback); with a token
// there is none, and admin.insecure beside a token is said to do nothing.
func TestAdminWarnings(t *testing.T) {
	cases := []struct {
		name      string
		listen    string
		token     bool
		insecure  bool
		want      string // substring of the one admin warning; "" for none
		wantCount int
	}{
		{"loopback, no token", "127.0.0.1:9090", false, false, "the admin API on 127.0.0.1:9090 has no token", 1},
		{"loopback, token", "127.0.0.1:9090", true, false, "", 0},
		{"off loopback, insecure", "0.0.0.0:9090", false, true, "INSECURE: admin.insecure = true and no token", 1},
		{"off loopback, token", "0.0.0.0:9090", true, false, "", 0},
		{"insecure beside a token", "0.0.0.0:9090", true, true, "admin.insecure = true has no effect", 1},
		{"no admin listener", "", false, false, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.Server.AdminListen, c.Admin.Insecure = tc.listen, tc.insecure
			if tc.token {
				c.Admin.TokenEnv = "ADMIN_TOKEN"
			}
			p, err := Compile(c, func(string) string { return "s3cret" }, noFiles)
			if err != nil {
				t.Fatal(err)
			}
			var admin []string
			for _, w := range p.Warnings {
				if strings.Contains(w, "admin") {
					admin = append(admin, w)
				}
			}
			if len(admin) != tc.wantCount || (tc.want != "" && !strings.Contains(admin[0], tc.want)) {
				t.Fatalf("admin warnings %q, want %d containing %q", admin, tc.wantCount, tc.want)
			}
		})
	}
}

// TestAdminAllowedHosts: names are kept in the form a Host header is
// compared with; anything that is no host name is refused with its index.
func TestAdminAllowedHosts(t *testing.T) {
	c := base()
	c.Admin.AllowedHosts = []string{"Tollgate-Admin.OPS.svc.", "gw_1.internal", "localhost"}
	p, err := Compile(c, func(string) string { return "" }, noFiles)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tollgate-admin.ops.svc", "gw_1.internal", "localhost"}; !slices.Equal(p.AdminHosts, want) {
		t.Errorf("AdminHosts %q, want %q", p.AdminHosts, want)
	}
	bad := []struct{ host, why string }{
		{"", "empty host name"},
		{".", "empty host name"},
		{"*.example.com", "wildcards are not supported"},
		{"admin.example.com:9090", "want a host name alone"},
		{"http://admin.example.com", "want a host name alone"},
		{"admin.example.com/x", "want a host name alone"},
		{"127.0.0.1", "an IP literal"},
		{"[::1]", "an IP literal"},
		{"::1", "an IP literal"},
		{"a..b", "each dot-separated label"},
		{strings.Repeat("a", 64) + ".example", "each dot-separated label"},
		{strings.Repeat("a.", 127) + "ab", "longer than 253 bytes"},
		{"adm in", "letters, digits"},
		{"admin\x00", "letters, digits"},
		{"ädmin", "letters, digits"},
	}
	for _, b := range bad {
		c := base()
		c.Admin.AllowedHosts = []string{"ok.example", b.host}
		wantProblems(t, validate(&c), []string{`admin.allowed_hosts[1]: `})
		if err := validate(&c); err == nil || !strings.Contains(err.Error(), b.why) {
			t.Errorf("%q: %v, want %q", b.host, err, b.why)
		}
	}
}

// TestAdminTokenBlank: a token no client can send (blank, or with white
// space around it) is refused like an empty one, so it never counts as a
// token that is set.
func TestAdminTokenBlank(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"", "admin.token_env: environment variable ADMIN_TOKEN is empty or unset"},
		{"   ", "admin.token_env: the token is blank"},
		{" s3cret", "admin.token_env: the token has leading or trailing white space"},
		{"s3cret\t", "admin.token_env: the token has leading or trailing white space"},
		{"s3cret", ""},
	} {
		c := base()
		c.Admin.TokenEnv = "ADMIN_TOKEN"
		c.Server.AdminListen = "0.0.0.0:9090"
		_, err := Compile(c, func(string) string { return tc.value }, noFiles)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("token %q: %v", tc.value, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("token %q: %v, want %q", tc.value, err, tc.want)
		}
	}
}

func noFiles(string) ([]byte, error) { return nil, errors.New("no files here") }
