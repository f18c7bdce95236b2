package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
)

// TestLimitTagSurvivesConnection: a client over a tag limit that names
// the tag header in its Connection header (asking every hop to drop it)
// still reaches the upstream tagged: the gateway's tag is its own, not a
// header of the client's connection.
func TestLimitTagSurvivesConnection(t *testing.T) {
	t.Parallel()
	body := `
[[limits]]
name = "soft"
rates = ["1/1h"]
algorithm = "fixed_window"
mode = "tag"
`
	g := startExprGateway(t, "memory", body, `"soft"`, "30s")
	for _, conn := range []string{"X-RateLimit-Exceeded", "x-ratelimit-exceeded", "keep-alive, X-Ratelimit-Exceeded"} {
		hdr := map[string]string{"Connection": conn, "X-RateLimit-Exceeded": "forged"}
		_ = rawDo(t, g.Listen, "GET", "/a", hdr) // the first is within the limit (or already over it)
		r := rawDo(t, g.Listen, "GET", "/a", hdr)
		if r.StatusCode != 200 || r.Header.Get("X-Seen-Tag") != "soft" {
			t.Fatalf("Connection: %s: %d, upstream saw tag %q, want 200 and \"soft\"", conn, r.StatusCode, r.Header.Get("X-Seen-Tag"))
		}
	}
	// A CGI-style upstream (PHP, WSGI, Rack) reads X_Ratelimit_Exceeded
	// as the same header, after the gateway's (Go writes names in order,
	// '_' after '-'): the client's respelling never reaches it.
	for _, name := range []string{"X_Ratelimit_Exceeded", "x_ratelimit-exceeded"} {
		r := rawDo(t, g.Listen, "GET", "/a", map[string]string{name: ""})
		if r.StatusCode != 200 || r.Header.Get("X-Seen-Tag") != "soft" || r.Header.Get("X-Seen-Respelled") != "" {
			t.Fatalf("%s: %d, upstream saw tag %q and respelled %q, want 200, \"soft\" and none", name, r.StatusCode, r.Header.Get("X-Seen-Tag"), r.Header.Get("X-Seen-Respelled"))
		}
	}
}

// TestExprWhenPathDodges: a when over request.path cannot be dodged by
// spelling the path another way. For each request target below, sent as
// written, either the limit applies (a second request on the target's own
// key is denied), or the upstream is sent a path that is not under
// /v1/orders even once percent-decoded and its dot segments resolved
// (what a liberal upstream would serve). Targets: repeated and dot
// segments, percent-encoded letters and slashes, another case, a
// parameter, a query, a fragment-like %23.
func TestExprWhenPathDodges(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Uri", r.RequestURI)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	body := `
[[limits]]
name = "orders"
rates = ["1/1h"]
algorithm = "fixed_window"
when = 'request.path.startsWith("/v1/orders")'
key = 'request.headers["x-k"]'
`
	data := map[string]any{"Body": body, "Limits": `"orders"`, "Upstream": up.URL, "Redis": "", "Timeout": "30s"}
	g := startGateway(t, "expr.toml.tmpl", gwOpts{Data: data})
	targets := []string{"/v1/orders", "/v1//orders", "/v1/./orders", "/v1/x/../orders", "/v1/%6Frders", "/v1/%6frders/3",
		"/v1%2Forders", "/v1%2forders", "/v1/orders%2F", "/v1/orders/", "//v1/orders", "/./v1/orders", "/v1/orders;x=1",
		"/v1/orders?a=1", "/v1/orders%3Fa", "/v1/orders%23x", "/%76%31/orders", "/v1/orders/..", "/v1/orders/%2e%2e/x",
		"/v1/ord%65rs", "/V1/orders", "/v1/orders%00", "/v1/./././/orders", "/v1;x/orders", "/V1/ORDERS", "/v1%2F%2Forders"}
	for i, target := range targets {
		hdr := map[string]string{"X-K": strconv.Itoa(i)}
		a := rawDo(t, g.Listen, "GET", target, hdr)
		b := rawDo(t, g.Listen, "GET", target, hdr)
		if b.StatusCode == 429 {
			continue // the limit applied
		}
		for _, r := range []rawResponse{a, b} {
			if r.StatusCode != 200 {
				continue // refused outright (400, 404): nothing reached the upstream
			}
			seen := r.Header.Get("X-Seen-Uri")
			p, _, _ := strings.Cut(seen, "?")
			if dec, err := url.PathUnescape(p); err == nil {
				p = dec
			}
			if c := path.Clean("/" + p); c == "/v1/orders" || strings.HasPrefix(c, "/v1/orders/") {
				t.Errorf("%s: %d then %d, the upstream was sent %q (%s once decoded): the when was dodged", target, a.StatusCode, b.StatusCode, seen, c)
			}
		}
	}
}
