package policy

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

func matchPolicy(t testing.TB) *Policy {
	t.Helper()
	return matchPolicyN(t, 10)
}

// matchPolicyN compiles the first n routes of the match tests' policy.
func matchPolicyN(t testing.TB, n int) *Policy {
	t.Helper()
	c := config.Default()
	route := func(name, host, prefix string, methods ...string) config.RouteConfig {
		r := config.DefaultRoute()
		r.Name, r.Host, r.PathPrefix, r.Methods, r.Upstream = name, host, prefix, methods, "http://127.0.0.1:9000"
		return r
	}
	c.Routes = []config.RouteConfig{
		route("root", "", "/"),
		route("search", "", "/v1/search", "GET"),
		route("search-any", "", "/v1/search"),
		route("v1", "", "/v1"),
		route("api-host", "API.example.com", "/"),
		route("api-host-v1", "api.example.com", "/v1"),
		route("ipv6-host", "[::1]", "/"),
		route("slash", "", "/dir/"),
		route("upper", "", "/Docs"),
		route("report", "", "/report", "GET"),
	}[:n]
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMatch(t *testing.T) {
	p := matchPolicy(t)
	tests := []struct {
		host, method, path string
		want               string // route name, "<nil>", or "400" for a rejected path
		normal             string // the normal path ("" when rejected)
	}{
		{"gw", "GET", "/v1/search", "search", "/v1/search"},
		{"gw", "GET", "/v1/search/x", "search", "/v1/search/x"},
		{"gw", "POST", "/v1/search", "search-any", "/v1/search"},
		{"gw", "GET", "/v1/searchx", "v1", "/v1/searchx"},
		{"gw", "GET", "/v1", "v1", "/v1"},
		{"gw", "GET", "/v1/", "v1", "/v1/"},
		{"gw", "GET", "/v2", "root", "/v2"},
		{"gw", "GET", "", "root", "/"},
		{"gw", "GET", "/", "root", "/"},
		// Respellings land on the route of their normal form.
		{"gw", "GET", "//v1//search", "search", "/v1/search"},
		{"gw", "GET", "/v1/./search", "search", "/v1/search"},
		{"gw", "GET", "/v1/x/../search", "search", "/v1/search"},
		{"gw", "GET", "/../v1/search", "search", "/v1/search"},
		{"gw", "GET", "/v1/search/", "search", "/v1/search/"},
		{"gw", "GET", "/v1/%73earch", "search", "/v1/search"},                   // unreserved escapes are decoded
		{"gw", "GET", "/v1/%2e%2E/v1/search", "search", "/v1/search"},           // so are dots
		{"gw", "GET", "/v1/search/..", "v1", "/v1/"},                            // ".." leaves the prefix
		{"gw", "GET", "/v1%3F/../v1/search", "search", "/v1/search"},            // %3F is data, ".." resolves
		{"gw", "GET", "/v2/a%2fb", "root", "/v2/a%2Fb"},                         // %2F is data; hex upper-cased
		{"gw", "GET", "/v1/search/a%2Fb;c/D", "search", "/v1/search/a%2Fb;c/D"}, // past the prefix, every reading agrees
		// A different route in the loose reading: rejected.
		{"gw", "GET", "/V1/search", "400", ""},
		{"gw", "GET", "/v1%2Fsearch", "400", ""},
		{"gw", "GET", "/v1/search;x", "400", ""},
		{"gw", "GET", "/v1;x/search", "400", ""},
		{"gw", "GET", "/v1/search%3bx", "400", ""},
		{"gw", "GET", "/docs", "400", ""}, // "/Docs" matches loosely
		{"gw", "GET", "/Docs/x", "upper", "/Docs/x"},
		{"gw", "GET", "/dir;x/", "400", ""},
		// Always rejected.
		{"gw", "GET", "/v1/..%2fsearch", "400", ""},
		{"gw", "GET", "/v1/..;/v2", "400", ""},
		{"gw", "GET", `/v1\search`, "400", ""},
		{"gw", "GET", "/v1%5csearch", "400", ""},
		{"gw", "GET", "/v1/search%00", "400", ""},
		{"gw", "GET", "*", "400", ""},
		{"gw", "GET", "v1/search", "400", ""},
		{"gw", "GET", "/v1/%zz", "400", ""},
		// Methods: exact, and GET covers HEAD.
		{"gw", "get", "/v1/search", "search-any", "/v1/search"},
		{"gw", "HEAD", "/v1/search", "search", "/v1/search"},
		{"gw", "HEAD", "/report", "report", "/report"},
		{"gw", "POST", "/report", "root", "/report"},
		// Hosts: explicit beats host-less even with a shorter prefix; case and port ignored.
		{"api.example.com", "GET", "/v1/search", "api-host-v1", "/v1/search"},
		{"API.Example.COM:8443", "GET", "/v2", "api-host", "/v2"},
		{"api.example.com.", "GET", "/v2", "api-host", "/v2"},
		{"other.example.com", "GET", "/v2", "root", "/v2"},
		{"[::1]:8080", "GET", "/x", "ipv6-host", "/x"},
		{"[::1]", "GET", "/x", "ipv6-host", "/x"},
		{"::1", "GET", "/x", "root", "/x"},
		{"gw", "GET", "/dir", "root", "/dir"},
		{"gw", "GET", "/dir/", "slash", "/dir/"},
		{"gw", "GET", "/dir/a", "slash", "/dir/a"},
	}
	for _, tt := range tests {
		rt, normal, err := p.Match(tt.host, tt.method, tt.path)
		got := "<nil>"
		switch {
		case err != nil:
			got, normal = "400", ""
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Errorf("Match(%q, %q, %q): error %v is not a *PathError", tt.host, tt.method, tt.path, err)
			}
		case rt != nil:
			got = rt.Name
		}
		if got != tt.want || normal != tt.normal {
			t.Errorf("Match(%q, %q, %q) = %s, %q, want %s, %q", tt.host, tt.method, tt.path, got, normal, tt.want, tt.normal)
		}
	}
}

func TestMatchNone(t *testing.T) {
	c := config.Default()
	r := config.DefaultRoute()
	r.Name, r.PathPrefix, r.Methods, r.Respond = "only", "/only", []string{"GET", "head"}, &config.RespondConfig{}
	c.Routes = []config.RouteConfig{r}
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range [][3]string{{"h", "GET", "/"}, {"h", "POST", "/only"}, {"h", "GET", "/onlyx"}, {"h", "GET", "/ONLY"}} {
		if rt, _, err := p.Match(q[0], q[1], q[2]); rt != nil || err != nil {
			t.Errorf("Match%q = %v, %v, want nil, nil", q, rt, err)
		}
	}
	if rt, _, _ := p.Match("h", "HEAD", "/only/x"); rt == nil {
		t.Error("lower-case configured method not normalised")
	}
}

// TestNormalizePath is a hand-written table of normal forms (RFC 3986
// §6.2.2 and §5.2.4) and rejections.
func TestNormalizePath(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/": "/", "/a/b": "/a/b", "/a/b/": "/a/b/", "//a": "/a", "/a//b/": "/a/b/", "///": "/",
		"/./a": "/a", "/a/.": "/a/", "/a/..": "/", "/..": "/", "/a/../../b": "/b", "/a/b/..": "/a/", "/a/b/../": "/a/",
		"/.well-known/x": "/.well-known/x", "/a/..b": "/a/..b", "/a/...": "/a/...", "/a/.b./c": "/a/.b./c",
		"/%2e": "/", "/a/%2E%2e/b": "/b", "/a/.%2e": "/", "/a/%2e.": "/", "/%2e%2e%2e": "/...",
		"/%41%7a%30%2D%2e%5F%7E": "/Az0-._~", "/%2f": "/%2F", "/%3f": "/%3F", "/%c3%A9": "/%C3%A9", "/%25": "/%25",
		"/a;b=c,d": "/a;b=c,d", "/!$&'()*+,;=:@": "/!$&'()*+,;=:@",
		"/é": "/%C3%A9", `/"<>^` + "`{|}#[]": "/%22%3C%3E%5E%60%7B%7C%7D%23%5B%5D", "/a b": "/a%20b",
		"/a%2Fb/../c": "/c", "/%3B": "/%3B", "/a;/b": "/a;/b", "/;": "/;",
	} {
		got, err := NormalizePath(in)
		if err != nil || got != want {
			t.Errorf("NormalizePath(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"*", "a", "?", // not rooted
		"/%", "/%2", "/%zz", "/%g0", // malformed escapes
		`/a\b`, "/%5c", "/%5C..", // backslash
		"/%00", "/a%0a", "/%1F", "/%7f", "/a\x00", "/a\x7f", "/\t", // control characters
		"/..%2f", "/%2F..", "/a/..%2fb", "/a/b%2f.", "/.%2F", "/..;", "/..;x/b", "/.;", "/a/..%3B", "/x%2F..%2Fy",
	} {
		if got, err := NormalizePath(in); err == nil {
			t.Errorf("NormalizePath(%q) = %q, want a rejection", in, got)
		}
	}
}

// TestCompilePrefixes: path_prefix is kept in normal form, and a prefix no
// request could match the same way on every upstream is refused.
func TestCompilePrefixes(t *testing.T) {
	for _, tc := range []struct{ prefix, want, err string }{
		{"/v1/./search/", "/v1/search/", ""},
		{"/caf%c3%a9", "/caf%C3%A9", ""},
		{"/%7euser", "/~user", ""},
		{"/a;b", "", "';'"},
		{"/a%2Fb", "", "';'"},
		{"/a%3bb", "", "';'"},
		{"/a/..%2f", "", "dot segment"},
		{"/a\\b", "", "backslash"},
	} {
		c := config.Default()
		r := config.DefaultRoute()
		r.Name, r.PathPrefix, r.Upstream = "r", tc.prefix, "http://127.0.0.1:9000"
		c.Routes = []config.RouteConfig{r}
		p, err := Compile(c, noEnv, os.ReadFile)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("path_prefix %q: %v", tc.prefix, err)
		case tc.err == "" && p.Routes[0].PathPrefix != tc.want:
			t.Errorf("path_prefix %q compiled to %q, want %q", tc.prefix, p.Routes[0].PathPrefix, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("path_prefix %q: error %v, want one containing %q", tc.prefix, err, tc.err)
		}
	}
	// Prefixes that are equal loosely would split one request between two
	// routes.
	c := config.Default()
	a, b := config.DefaultRoute(), config.DefaultRoute()
	a.Name, a.PathPrefix, a.Upstream = "a", "/api", "http://127.0.0.1:9000"
	b.Name, b.PathPrefix, b.Upstream = "b", "/API", "http://127.0.0.1:9000"
	c.Routes = []config.RouteConfig{a, b}
	if _, err := Compile(c, noEnv, os.ReadFile); err == nil || !strings.Contains(err.Error(), "never be chosen") {
		t.Errorf("routes on /api and /API: %v, want a shadowing error", err)
	}
}

func TestMatchAllocs(t *testing.T) {
	p := matchPolicy(t)
	for _, path := range []string{"/v1/search/abc", "/v1/search/ABC/%2F;x", "/v1/..%2f"} {
		if n := testing.AllocsPerRun(100, func() { p.Match("api.example.com:443", "GET", path) }); n != 0 {
			t.Errorf("Match(%q) allocates %v times per call", path, n)
		}
	}
}

// BenchmarkMatch measures route matching with normalisation: a normal
// path, one that must also be read loosely (upper case), and respellings
// that must be rewritten.
//
// The policy is the first 8 routes (no capital in a prefix), the one the
// benchmark used before normalisation, so figures compare across versions.
func BenchmarkMatch(b *testing.B) {
	p := matchPolicyN(b, 8)
	for _, bc := range []struct{ name, host, path string }{
		{"clean", "gw:8080", "/v1/search/items"},
		{"host", "API.example.com:443", "/v1/search"},
		{"upper", "gw", "/v1/search/Items/ABC"},
		{"respelled", "gw", "//v1/./search/items"},
		{"escaped", "gw", "/v1/%73earch/items%2fx"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if rt, _, _ := p.Match(bc.host, "GET", bc.path); rt == nil {
						b.Fatal("no route")
					}
				}
			})
		})
	}
}

// TestLooseKeyMatchesSamePrefix: looseKey, which the route table's shadow
// check groups by, is equal for two prefixes exactly when samePrefix
// holds, over respellings of case, escapes, slashes, parameters and
// Unicode folding.
func TestLooseKeyMatchesSamePrefix(t *testing.T) {
	prefixes := []string{"/api", "/API", "/a%70i", "/api/", "//api", "/api;x", "/api/v1", "/Api/V1/",
		"/\u212a", "/k", "/K", "/\u017f", "/s", "/%C5%BF", "/\xff", "/\xfe", "/caf\u00e9", "/CAF\u00c9", "/a%2Fb", "/a/b"}
	for _, a := range prefixes {
		for _, b := range prefixes {
			if got, want := looseKey(a) == looseKey(b), samePrefix(a, b); got != want {
				t.Errorf("looseKey(%q) == looseKey(%q) is %v, samePrefix %v", a, b, got, want)
			}
		}
	}
}
