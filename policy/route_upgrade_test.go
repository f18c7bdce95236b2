package policy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestValidateUpgrades: every check of routes[].upgrades, with the exact
// problem line each must produce.
func TestValidateUpgrades(t *testing.T) {
	up := func(list ...string) func(c *config.Config) {
		return func(c *config.Config) { c.Routes[0].Upgrades = list }
	}
	testProblems(t, base, []problemCase{
		{"websocket", up("websocket"), nil},
		{"any case, a version", up("WebSocket", "spdy/3.1"), nil},
		{"empty list", up(), nil},
		{"empty name", up(""), []string{`routes[0].upgrades[0]: invalid protocol ""`}},
		{"space", up("web socket"), []string{`routes[0].upgrades[0]: invalid protocol "web socket"`}},
		{"comma", up("websocket, foo"), []string{`routes[0].upgrades[0]: invalid protocol "websocket, foo"`}},
		{"empty version", up("spdy/"), []string{`routes[0].upgrades[0]: invalid protocol "spdy/"`}},
		{"two slashes", up("a/b/c"), []string{`routes[0].upgrades[0]: invalid protocol "a/b/c"`}},
		{"CRLF", up("websocket\r\nX-Evil: 1"), []string{`routes[0].upgrades[0]: invalid protocol`}},
		{"h2c", up("h2c"), []string{`routes[0].upgrades[0]: "h2c" cannot be allowed: HTTP versions are hop by hop`}},
		{"H2C", up("websocket", "H2C"), []string{`routes[0].upgrades[1]: "H2C" cannot be allowed`}},
		{"h2", up("h2"), []string{`routes[0].upgrades[0]: "h2" cannot be allowed`}},
		{"HTTP/2.0", up("HTTP/2.0"), []string{`routes[0].upgrades[0]: "HTTP/2.0" cannot be allowed`}},
		{"duplicate in another case", up("websocket", "WEBSOCKET"), []string{`routes[0].upgrades[1]: duplicate protocol "WEBSOCKET"`}},
		{"respond route", func(c *config.Config) { c.Routes[1].Upgrades = []string{"websocket"} },
			[]string{`routes[1].upgrades: applies only to a route with an upstream`}},
		{"h2c upstream", func(c *config.Config) {
			c.Routes[0].Upstream, c.Routes[0].Upgrades = "h2c://127.0.0.1:9000", []string{"websocket"}
		},
			[]string{`routes[0].upgrades: an h2c:// upstream speaks HTTP/2, which has no Upgrade`}},
	})
}

// TestCompileUpgrades: upgrades compile to lower case; none by default.
func TestCompileUpgrades(t *testing.T) {
	c := base()
	c.Routes[0].Upgrades = []string{"WebSocket", "SPDY/3.1"}
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Routes[0].Upgrades; !slices.Equal(got, []string{"websocket", "spdy/3.1"}) {
		t.Errorf("upgrades compiled to %q", got)
	}
	if p.Routes[1].Upgrades != nil || p.Routes[1].AllowsUpgrade([]string{"websocket"}) {
		t.Error("a route without upgrades allows one")
	}
	if !p.Routes[0].AllowsUpgrade([]string{strings.ToUpper("websocket")}) {
		t.Error("WEBSOCKET not allowed by upgrades = [\"WebSocket\"]")
	}
}
