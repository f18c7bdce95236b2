package policy

import (
	"os"
	"testing"
)

func matchPolicy(t testing.TB) *Policy {
	t.Helper()
	c := Default()
	route := func(name, host, prefix string, methods ...string) RouteConfig {
		r := DefaultRoute()
		r.Name, r.Host, r.PathPrefix, r.Methods, r.Upstream = name, host, prefix, methods, "http://127.0.0.1:9000"
		return r
	}
	c.Routes = []RouteConfig{
		route("root", "", "/"),
		route("search", "", "/v1/search", "GET"),
		route("search-any", "", "/v1/search"),
		route("v1", "", "/v1"),
		route("api-host", "API.example.com", "/"),
		route("api-host-v1", "api.example.com", "/v1"),
		route("ipv6-host", "[::1]", "/"),
		route("slash", "", "/dir/"),
	}
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
		want               string
	}{
		{"gw", "GET", "/v1/search", "search"},
		{"gw", "GET", "/v1/search/x", "search"},
		{"gw", "GET", "/v1/search?q=1", "search"},
		{"gw", "POST", "/v1/search", "search-any"},
		{"gw", "GET", "/v1/searchx", "v1"},
		{"gw", "GET", "/v1", "v1"},
		{"gw", "GET", "/v1/", "v1"},
		{"gw", "GET", "/v2", "root"},
		{"gw", "GET", "", "root"},
		{"gw", "GET", "/", "root"},
		// SCENARIOS 16: respellings land on the route the cleaned path selects.
		{"gw", "GET", "//v1//search", "search"},
		{"gw", "GET", "/v1/./search", "search"},
		{"gw", "GET", "/v1/x/../search", "search"},
		{"gw", "GET", "/../v1/search", "search"},
		{"gw", "GET", "/v1/search/", "search"},
		{"gw", "GET", "/V1/search", "root"},       // paths are case sensitive
		{"gw", "GET", "/v1/%73earch", "v1"},       // nothing is percent-decoded
		{"gw", "GET", "/v1/search/..", "v1"},      // ".." leaves the prefix
		{"gw", "GET", "v1/search", "search"},      // relative form is rooted
		{"gw", "get", "/v1/search", "search-any"}, // methods are exact
		// Hosts: explicit beats host-less even with a shorter prefix; case and port ignored.
		{"api.example.com", "GET", "/v1/search", "api-host-v1"},
		{"API.Example.COM:8443", "GET", "/v2", "api-host"},
		{"api.example.com.", "GET", "/v2", "api-host"},
		{"other.example.com", "GET", "/v2", "root"},
		{"[::1]:8080", "GET", "/x", "ipv6-host"},
		{"[::1]", "GET", "/x", "ipv6-host"},
		{"::1", "GET", "/x", "root"},
		{"gw", "GET", "/dir", "root"},
		{"gw", "GET", "/dir/", "slash"},
		{"gw", "GET", "/dir/a", "slash"},
	}
	for _, tt := range tests {
		rt := p.Match(tt.host, tt.method, tt.path)
		got := "<nil>"
		if rt != nil {
			got = rt.Name
		}
		if got != tt.want {
			t.Errorf("Match(%q, %q, %q) = %s, want %s", tt.host, tt.method, tt.path, got, tt.want)
		}
	}
}

func TestMatchNone(t *testing.T) {
	c := Default()
	r := DefaultRoute()
	r.Name, r.PathPrefix, r.Methods, r.Respond = "only", "/only", []string{"GET", "head"}, &RespondConfig{}
	c.Routes = []RouteConfig{r}
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range [][3]string{{"h", "GET", "/"}, {"h", "POST", "/only"}, {"h", "GET", "/onlyx"}} {
		if rt := p.Match(q[0], q[1], q[2]); rt != nil {
			t.Errorf("Match%q = %s, want nil", q, rt.Name)
		}
	}
	if rt := p.Match("h", "HEAD", "/only/x"); rt == nil {
		t.Error("lower-case configured method not normalised")
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/": "/", "/a/b": "/a/b", "/a/b/": "/a/b/", "//a": "/a", "/a//b/": "/a/b/",
		"/./a": "/a", "/a/.": "/a", "/a/..": "/", "/..": "/", "/a/../../b": "/b", "a": "/a",
		"/a?x=/../": "/a", "/a/%2e%2e/b": "/a/%2e%2e/b", "/.well-known/x": "/.well-known/x", "/a/..b": "/a/..b",
	} {
		if got := CleanPath(in); got != want {
			t.Errorf("CleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchAllocs(t *testing.T) {
	p := matchPolicy(t)
	if n := testing.AllocsPerRun(100, func() { p.Match("api.example.com:443", "GET", "/v1/search/abc") }); n != 0 {
		t.Errorf("Match allocates %v times per call on a clean path", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	p := matchPolicy(b)
	for _, bc := range []struct{ name, host, path string }{
		{"clean", "gw:8080", "/v1/search/items"},
		{"host", "API.example.com:443", "/v1/search"},
		{"respelled", "gw", "//v1/./search/items"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if p.Match(bc.host, "GET", bc.path) == nil {
						b.Fatal("no route")
					}
				}
			})
		})
	}
}
