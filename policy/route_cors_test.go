package policy

import (
	"os"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestValidateCORS: hostile cors tables, each with its exact problem.
func TestValidateCORS(t *testing.T) {
	cors := func(c config.CORSConfig) func(*config.Config) {
		return func(cfg *config.Config) { cfg.Routes[0].CORS = &c }
	}
	origins := func(o ...string) func(*config.Config) { return cors(config.CORSConfig{Origins: o}) }
	testProblemsContain(t, []problemCase{
		{"one origin", origins("https://app.example"), nil},
		{"port", origins("http://localhost:3000"), nil},
		{"IPv6", origins("http://[::1]:8080"), nil},
		{"any", origins("*"), nil},
		{"any with credentials", cors(config.CORSConfig{Origins: []string{"*"}, Credentials: true}),
			[]string{`routes[0].cors.credentials: cannot be true with origins = ["*"]: any site could then read answers with the user's cookies; list the origins`}},
		{"any among others", origins("https://a.example", "*"), []string{`routes[0].cors.origins[1]: "*" allows every origin: list it alone`}},
		{"none", origins(), []string{`routes[0].cors.origins: is required: the origins allowed, or ["*"] for any`}},
		{"wildcard subdomain", origins("https://*.example.com"), []string{`routes[0].cors.origins[0]: "https://*.example.com": wildcards are not supported`}},
		{"null", origins("null"), []string{`routes[0].cors.origins[0]: "null": "null" is the origin of sandboxed frames`}},
		{"no scheme", origins("example.com"), []string{`routes[0].cors.origins[0]: "example.com": want scheme://host[:port]`}},
		{"trailing slash", origins("https://example.com/"), []string{`an origin has no path, query or fragment`}},
		{"path", origins("https://example.com/app"), []string{`an origin has no path`}},
		{"query", origins("https://example.com?x"), []string{`an origin has no path`}},
		{"bare ?", origins("https://example.com?"), []string{`an origin has no path`}},
		{"user", origins("https://u@example.com"), []string{`with a host and no user`}},
		{"trailing dot", origins("https://example.com."), []string{`a trailing dot makes a different origin`}},
		{"IDN", origins("https://bücher.example"), []string{`routes[0].cors.origins[0]: "https://bücher.example": write the host in its ASCII (punycode) form`}},
		{"punycode", origins("https://xn--bcher-kva.example"), nil},
		{"port 0", origins("https://example.com:0"), []string{`invalid port`}},
		{"port 70000", origins("https://example.com:70000"), []string{`invalid port`}},
		{"CRLF", origins("https://a.example\r\nX: 1"), []string{`want scheme://host[:port]`}},
		{"bad method", cors(config.CORSConfig{Origins: []string{"*"}, Methods: []string{"GET PUT"}}), []string{`routes[0].cors.methods[0]: invalid method "GET PUT"`}},
		{"bad header", cors(config.CORSConfig{Origins: []string{"*"}, Headers: []string{"X-A\r\n"}}), []string{`routes[0].cors.headers[0]: invalid header name`}},
		{"expose *", cors(config.CORSConfig{Origins: []string{"*"}, ExposeHeaders: []string{"*"}}), []string{`routes[0].cors.expose_headers[0]: invalid header name "*" (name each header)`}},
		{"max_age", cors(config.CORSConfig{Origins: []string{"*"}, MaxAge: "48h"}), []string{`routes[0].cors.max_age: at most 24h0m0s, got 48h`}},
		{"max_age bad", cors(config.CORSConfig{Origins: []string{"*"}, MaxAge: "soon"}), []string{`routes[0].cors.max_age: invalid duration "soon"`}},
	})
}

// TestCORSOrigins: which request Origins an allowed list matches. Exact
// scheme://host[:port], case-insensitive, default ports as browsers send
// them (omitted); no suffix, prefix or pattern matching.
func TestCORSOrigins(t *testing.T) {
	c := base()
	c.Routes[0].CORS = &config.CORSConfig{Origins: []string{"https://App.Example:443", "http://localhost:3000"}}
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	cors := p.Routes[0].CORS
	for origin, want := range map[string]bool{
		"https://app.example":             true,
		"HTTPS://APP.EXAMPLE":             true,
		"http://localhost:3000":           true,
		"https://app.example:443":         false, // browsers never send a default port
		"https://app.example.":            false,
		"https://app.example.evil.com":    false,
		"https://evil-app.example":        false,
		"https://xapp.example":            false,
		"http://app.example":              false,
		"https://app.example:8443":        false,
		"http://localhost:3001":           false,
		"http://localhost":                false,
		"null":                            false,
		"":                                false,
		"https://app.example/":            false,
		"https://app.example\r\nX: 1":     false,
		"https://app.example, https://x":  false,
		"https://sub.app.example":         false,
		"https://app.example@evil.com":    false,
		"https://app.example%2f.evil.com": false,
	} {
		if got := cors.AllowsOrigin(origin); got != want {
			t.Errorf("AllowsOrigin(%q) = %v, want %v", origin, got, want)
		}
	}
	for list, want := range map[string]bool{
		"":                         true,
		"x-custom":                 false,
		"content-type":             false,
		"x-a,\"b\"":                false,
		string(make([]byte, 5000)): false,
	} {
		if got := cors.AllowsHeaders(list); got != want {
			t.Errorf("AllowsHeaders(%q) = %v, want %v", list, got, want)
		}
	}
	if !cors.AllowsMethod("GET") || !cors.AllowsMethod("POST") || cors.AllowsMethod("DELETE") || cors.AllowsMethod("get") {
		t.Error("methods: want the safelisted GET, HEAD, POST only, case-sensitive")
	}
}
