package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// corsBody is a route with cors in front of up: https://app.example and
// http://localhost:3000 allowed, a custom header, one request a minute
// per IP, GET and PUT only (so a preflight's OPTIONS matches the route
// by the method it asks for).
func corsBody(up, origins string) string {
	return fmt.Sprintf(`
[[limits]]
name = "one"
rates = ["1/minute"]
by = ["ip"]

[[routes]]
name = "api"
path_prefix = "/api"
methods = ["GET", "PUT"]
upstream = %q
limits = ["one"]
cors = { origins = [%s], methods = ["GET", "PUT"], headers = ["X-Custom", "Content-Type"], expose_headers = ["X-Upstream"], max_age = "10m" }
`, up, origins)
}

// TestCORS: preflights are answered by the gateway (never forwarded,
// counted by no limit, even a flood of them), with the allow headers only
// for an allowed origin, method and header list; an actual request from
// an allowed origin gets Access-Control-Allow-Origin, Vary and the expose
// list on the upstream's answer and on the gateway's own 429. Origin
// tricks match nothing. Mutations checked: forwarding preflights (no
// preflight in serve) fails "flood"; AllowsOrigin by prefix fails
// "tricks"; setting the CORS headers in ModifyResponse instead of
// finishHeader fails "429".
func TestCORS(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := startMessages(t, "", corsBody(up.URL, `"https://app.example", "http://localhost:3000"`))
	c := newClient(t, "")
	preflight := func(origin, method, hdrs string) *response {
		t.Helper()
		h := map[string]string{"Origin": origin, "Access-Control-Request-Method": method}
		if hdrs != "" {
			h["Access-Control-Request-Headers"] = hdrs
		}
		return do(t, c, http.MethodOptions, f.url("/api/x"), h)
	}
	t.Run("flood", func(t *testing.T) {
		for i := range 50 {
			r := preflight("https://app.example", "PUT", "x-custom,content-type")
			if r.Status != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
				r.Header.Get("Access-Control-Allow-Methods") != "GET, PUT" || r.Header.Get("Access-Control-Allow-Headers") != "x-custom,content-type" ||
				r.Header.Get("Access-Control-Max-Age") != "600" {
				t.Fatalf("preflight %d: %s", i, r)
			}
		}
		if n := up.count(); n != 0 {
			t.Fatalf("%d preflights reached the upstream", n)
		}
	})
	t.Run("refused preflights", func(t *testing.T) {
		for _, tc := range []struct{ name, origin, method, hdrs string }{
			{"origin", "https://evil.example", "GET", ""},
			{"method", "https://app.example", "DELETE", ""},
			{"header", "https://app.example", "GET", "x-custom,x-secret"},
			{"bad header list", "https://app.example", "GET", "x-custom,\"x\""},
		} {
			r := preflight(tc.origin, tc.method, tc.hdrs)
			// A method no route takes: 404, as the request itself would be.
			if want := map[bool]int{true: 404, false: 204}[tc.name == "method"]; r.Status != want || r.Header.Get("Access-Control-Allow-Origin") != "" || r.Header.Get("Access-Control-Allow-Methods") != "" {
				t.Errorf("%s not allowed: preflight answered %s, want 204 (404 for a method no route takes) without allow headers", tc.name, r)
			}
		}
		if n := up.count(); n != 0 {
			t.Fatalf("%d refused preflights reached the upstream", n)
		}
	})
	t.Run("tricks", func(t *testing.T) {
		for _, origin := range []string{"null", "https://app.example.evil.com", "https://app.example.", "https://app.example:443",
			"http://app.example", "https://app.exampl", "https://xapp.example", "http://localhost:3001", "https://app.example/"} {
			if r := preflight(origin, "GET", ""); r.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("origin %q allowed: %s", origin, r)
			}
		}
		if r := preflight("HTTPS://APP.EXAMPLE", "GET", ""); r.Header.Get("Access-Control-Allow-Origin") != "HTTPS://APP.EXAMPLE" {
			t.Errorf("an allowed origin in upper case (scheme and host are case-insensitive) refused: %s", r)
		}
	})
	t.Run("429", func(t *testing.T) {
		h := map[string]string{"Origin": "http://localhost:3000"}
		r := get(t, c, f.url("/api/x"), h)
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" ||
			!strings.Contains(r.Header.Get("Vary"), "Origin") || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-Upstream") {
			t.Fatalf("actual request from an allowed origin: %s", r)
		}
		r = get(t, c, f.url("/api/x"), h)
		if r.Status != 429 || r.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" ||
			!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
			t.Fatalf("the gateway's 429 to an allowed origin lacks the CORS headers a page needs to read it: %s", r)
		}
		r = get(t, newClient(t, "127.0.0.2"), f.url("/api/x"), map[string]string{"Origin": "https://evil.example"})
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(r.Header.Get("Vary"), "Origin") {
			t.Fatalf("actual request from another origin: %s (want the answer without allow headers, Vary: Origin)", r)
		}
	})
}

// TestCORSBrowser: a real headless Chromium. A page served from one
// origin (a tiny server on its own port) fetch()es the gateway on another
// origin with a custom header, which forces a preflight; it reads the
// upstream's answer and an exposed header. A page from an origin not
// allowed fails in the browser, and its preflight never reaches the
// upstream. Over the limit, the page reads the gateway's 429 and its
// Retry-After. Mutations checked: dropping Access-Control-Allow-Headers
// from the preflight's answer, or the expose list, fails it.
func TestCORSBrowser(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	pages := func() (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<!doctype html><title>page</title>"))
		})}
		go func() { _ = srv.Serve(ln) }()
		return "http://" + ln.Addr().String(), func() { srv.Close() }
	}
	allowed, stopA := pages()
	defer stopA()
	other, stopB := pages()
	defer stopB()
	f := startMessages(t, "", corsBody(up.URL, fmt.Sprintf("%q", allowed)))
	b := startBrowser(t)

	fetch := fmt.Sprintf(`fetch(%q, {method: "PUT", headers: {"X-Custom": "1"}, body: "hi"})
		.then(async r => ({ok: true, status: r.status, upstream: r.headers.get("X-Upstream"), id: r.headers.get("X-Request-Id"), body: await r.text()}))
		.catch(e => ({ok: false, error: String(e)}))`, f.url("/api/x"))
	var got struct {
		OK       bool   `json:"ok"`
		Status   int    `json:"status"`
		Upstream string `json:"upstream"`
		ID       string `json:"id"`
		Body     string `json:"body"`
		Error    string `json:"error"`
	}
	b.navigate(allowed + "/")
	b.eval(fetch, &got)
	if !got.OK || got.Status != 200 || got.Upstream != "echo" || !generatedID.MatchString(got.ID) || !strings.Contains(got.Body, `"method":"PUT"`) {
		t.Fatalf("fetch from the allowed origin %s: %+v", allowed, got)
	}
	if n := up.count(); n != 1 {
		t.Fatalf("the upstream saw %d requests, want 1 (the PUT; the preflight stays at the gateway)", n)
	}
	// The next one is over the limit: the page can read the gateway's 429
	// and its Retry-After (exposed), so it can back off.
	var limited struct {
		Status     int    `json:"status"`
		RetryAfter string `json:"retryAfter"`
	}
	b.eval(fmt.Sprintf(`fetch(%q, {method: "PUT", headers: {"X-Custom": "1"}, body: "hi"})
		.then(r => ({status: r.status, retryAfter: r.headers.get("Retry-After")}))`, f.url("/api/x")), &limited)
	if limited.Status != 429 || limited.RetryAfter == "" {
		t.Fatalf("the page read %+v over the limit, want 429 with a Retry-After", limited)
	}
	b.navigate(other + "/")
	got = struct {
		OK       bool   `json:"ok"`
		Status   int    `json:"status"`
		Upstream string `json:"upstream"`
		ID       string `json:"id"`
		Body     string `json:"body"`
		Error    string `json:"error"`
	}{}
	b.eval(fetch, &got)
	if got.OK {
		t.Fatalf("fetch from %s, an origin not allowed, succeeded in the browser: %+v", other, got)
	}
	if n := up.count(); n != 1 {
		t.Fatalf("the upstream saw %d requests after a 429 and a refused preflight, want still 1", n)
	}
}
