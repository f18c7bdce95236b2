package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGuardHostile: the requests a browser can be made to send to the
// admin listener (a DNS name rebound to it, another site's form or fetch)
// and the ones operators and their tools send, each with its answer.
// Only requests the guard lets through reach the handler (200 here).
func TestGuardHostile(t *testing.T) {
	const (
		toml = "application/toml"
		json = "application/json"
	)
	type hdr = map[string]string
	cases := []struct {
		name    string
		method  string
		host    string
		hdr     hdr
		body    string
		chunked bool
		want    int
	}{
		// Host: DNS rebinding sends the attacker's name.
		{"loopback IPv4 with port", "GET", "127.0.0.1:9090", nil, "", false, 200},
		{"IPv4 without port", "GET", "127.0.0.1", nil, "", false, 200},
		{"pod IP (probe, scrape)", "GET", "10.1.2.3:9090", nil, "", false, 200},
		{"IPv4 with a trailing dot", "GET", "127.0.0.1.:9090", nil, "", false, 200},
		{"IPv6 loopback", "GET", "[::1]:9090", nil, "", false, 200},
		{"IPv6 without port", "GET", "[::1]", nil, "", false, 200},
		{"IPv6 long form", "GET", "[0:0::1]:9090", nil, "", false, 200},
		{"IPv4-mapped IPv6", "GET", "[::ffff:127.0.0.1]:9090", nil, "", false, 200},
		{"IPv6 with a zone", "GET", "[fe80::1%25eth0]:9090", nil, "", false, 200},
		{"IPv6 unbracketed", "GET", "::1", nil, "", false, 421},
		{"IPv4 in brackets", "GET", "[127.0.0.1]:9090", nil, "", false, 421},
		{"unclosed bracket", "GET", "[::1:9090", nil, "", false, 421},
		{"junk after bracket", "GET", "[::1]x9090", nil, "", false, 421},
		{"localhost", "GET", "localhost:9090", nil, "", false, 200},
		{"localhost uppercase, trailing dot", "GET", "LOCALHOST.:9090", nil, "", false, 200},
		{"localhost, empty port", "GET", "localhost:", nil, "", false, 200},
		{"listed name", "GET", "tollgate-admin.ops.svc:9090", nil, "", false, 200},
		{"listed name, uppercase, trailing dot", "GET", "Tollgate-Admin.OPS.svc.", nil, "", false, 200},
		{"foreign name (rebinding)", "GET", "evil.example:9090", nil, "", false, 421},
		{"foreign name without port", "GET", "evil.example", nil, "", false, 421},
		{"subdomain of localhost", "GET", "evil.localhost:9090", nil, "", false, 421},
		{"subdomain of a listed name", "GET", "x.tollgate-admin.ops.svc", nil, "", false, 421},
		{"listed name as a suffix", "GET", "eviltollgate-admin.ops.svc", nil, "", false, 421},
		{"decimal IPv4 (a name to DNS)", "GET", "2130706433:9090", nil, "", false, 421},
		{"port not a number", "GET", "127.0.0.1:90a0", nil, "", false, 421},
		{"port too long", "GET", "127.0.0.1:000009090", nil, "", false, 421},
		{"empty Host (HTTP/1.0)", "GET", "", nil, "", false, 421},
		{"foreign Host on a write", "POST", "evil.example:9090", hdr{"Content-Type": toml}, "x", false, 421},
		{"foreign Host on HEAD", "HEAD", "evil.example", nil, "", false, 421},

		// Origin and Sec-Fetch-Site on writes.
		{"no Origin (curl)", "POST", "127.0.0.1:9090", nil, "", false, 200},
		{"same Origin", "POST", "127.0.0.1:9090", hdr{"Origin": "http://127.0.0.1:9090"}, "", false, 200},
		{"same Origin, https behind a proxy", "POST", "tollgate-admin.ops.svc", hdr{"Origin": "https://tollgate-admin.ops.svc"}, "", false, 200},
		{"same Origin, default port spelled", "POST", "localhost:80", hdr{"Origin": "http://localhost"}, "", false, 200},
		{"same Origin, case and dot", "POST", "localhost:9090", hdr{"Origin": "HTTP://LocalHost.:9090"}, "", false, 200},
		{"same Origin, IPv6", "POST", "[::1]:9090", hdr{"Origin": "http://[::1]:9090"}, "", false, 200},
		{"foreign Origin", "POST", "127.0.0.1:9090", hdr{"Origin": "https://evil.example"}, "", false, 403},
		{"Origin of another port", "POST", "127.0.0.1:9090", hdr{"Origin": "http://127.0.0.1:8080"}, "", false, 403},
		{"Origin of another loopback host", "POST", "127.0.0.1:9090", hdr{"Origin": "http://localhost:9090"}, "", false, 403},
		{"Origin https, Host port 80", "POST", "localhost:80", hdr{"Origin": "https://localhost"}, "", false, 403},
		{"Origin null (sandboxed frame, file:)", "POST", "127.0.0.1:9090", hdr{"Origin": "null"}, "", false, 403},
		{"Origin empty", "POST", "127.0.0.1:9090", hdr{"Origin": ""}, "", false, 403},
		{"Origin with a path", "POST", "127.0.0.1:9090", hdr{"Origin": "http://127.0.0.1:9090/admin"}, "", false, 403},
		{"Origin with userinfo", "POST", "127.0.0.1:9090", hdr{"Origin": "http://u@127.0.0.1:9090"}, "", false, 403},
		{"Origin of an extension", "POST", "127.0.0.1:9090", hdr{"Origin": "chrome-extension://abc"}, "", false, 403},
		{"Origin garbage", "POST", "127.0.0.1:9090", hdr{"Origin": "%%%"}, "", false, 403},
		{"Sec-Fetch-Site cross-site", "POST", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site"}, "", false, 403},
		{"Sec-Fetch-Site same-site", "DELETE", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "same-site"}, "", false, 403},
		{"Sec-Fetch-Site unknown", "POST", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "whatever"}, "", false, 403},
		{"Sec-Fetch-Site same-origin", "DELETE", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:9090"}, "", false, 200},
		{"Sec-Fetch-Site none", "POST", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "none"}, "", false, 200},
		{"same Origin but cross-site fetch", "POST", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Origin": "http://127.0.0.1:9090"}, "", false, 403},
		{"foreign Origin on PUT", "PUT", "127.0.0.1:9090", hdr{"Origin": "https://evil.example", "Content-Type": json}, "{}", false, 403},
		{"foreign Origin on PATCH", "PATCH", "127.0.0.1:9090", hdr{"Origin": "https://evil.example"}, "", false, 403},
		{"foreign Origin on an unknown method", "PURGE", "127.0.0.1:9090", hdr{"Origin": "https://evil.example"}, "", false, 403},
		// Reads: the browser's same-origin policy keeps the answer from
		// another site, but a read loaded from another page still runs
		// (a profile, a stop-the-world goroutine dump): only a top-level
		// navigation (a link the operator follows) may come from there.
		{"cross-site link to the dashboard", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, "", false, 200},
		{"same-site link", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, "", false, 200},
		{"typed address", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, "", false, 200},
		{"same-origin fetch (the dashboard's data)", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}, "", false, 200},
		{"cross-site <img> (pprof from another page)", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, "", false, 403},
		{"cross-site frame", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, "", false, 403},
		{"cross-site script", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}, "", false, 403},
		{"cross-site fetch", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": "https://evil.example"}, "", false, 403},
		{"same-site fetch (another port of localhost)", "GET", "localhost:9090", hdr{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "empty"}, "", false, 403},
		{"navigation that names an Origin", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Origin": "https://evil.example"}, "", false, 403},
		{"Dest document without navigate", "GET", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "document"}, "", false, 403},
		{"cross-site navigation by POST (a form)", "POST", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, "", false, 403},
		{"cross-site HEAD without metadata of a navigation", "HEAD", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site"}, "", false, 403},
		{"foreign Origin on a GET (an old browser's fetch)", "GET", "127.0.0.1:9090", hdr{"Origin": "https://evil.example"}, "", false, 403},
		{"same Origin on a GET", "GET", "127.0.0.1:9090", hdr{"Origin": "http://127.0.0.1:9090"}, "", false, 200},
		{"preflight OPTIONS", "OPTIONS", "127.0.0.1:9090", hdr{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, "", false, 403},
		{"preflight OPTIONS, fetch metadata", "OPTIONS", "127.0.0.1:9090", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, "", false, 403},
		{"OPTIONS without browser headers (curl)", "OPTIONS", "127.0.0.1:9090", nil, "", false, 200},
		{"<img> from a browser without fetch metadata", "GET", "127.0.0.1:9090", nil, "", false, 200},

		// Bodies of writes.
		{"TOML body", "POST", "127.0.0.1:9090", hdr{"Content-Type": toml}, "[server]", false, 200},
		{"JSON body with charset", "PUT", "127.0.0.1:9090", hdr{"Content-Type": "application/json; charset=utf-8"}, "{}", false, 200},
		{"JSON body, uppercase type", "PUT", "127.0.0.1:9090", hdr{"Content-Type": "Application/JSON"}, "{}", false, 200},
		{"text/plain body (CSRF simple request)", "POST", "127.0.0.1:9090", hdr{"Content-Type": "text/plain"}, "[server]", false, 415},
		{"text/plain with charset", "POST", "127.0.0.1:9090", hdr{"Content-Type": "text/plain;charset=UTF-8"}, "[server]", false, 415},
		{"form body", "POST", "127.0.0.1:9090", hdr{"Content-Type": "application/x-www-form-urlencoded"}, "a=b", false, 415},
		{"multipart body", "POST", "127.0.0.1:9090", hdr{"Content-Type": "multipart/form-data; boundary=x"}, "--x--", false, 415},
		{"body without Content-Type", "POST", "127.0.0.1:9090", nil, "[server]", false, 415},
		{"chunked body without Content-Length or type", "POST", "127.0.0.1:9090", nil, "[server]", true, 415},
		{"chunked TOML body", "POST", "127.0.0.1:9090", hdr{"Content-Type": toml}, "[server]", true, 200},
		{"two media types (a browser reads the last)", "POST", "127.0.0.1:9090", hdr{"Content-Type": "application/json, text/plain"}, "{}", false, 415},
		{"a JSON type with a text/plain parameter", "POST", "127.0.0.1:9090", hdr{"Content-Type": "text/plain; x=application/json"}, "{}", false, 415},
		{"malformed media type", "POST", "127.0.0.1:9090", hdr{"Content-Type": "application/json;;="}, "{}", false, 415},
		{"non-simple but unread type", "POST", "127.0.0.1:9090", hdr{"Content-Type": "application/xml"}, "<a/>", false, 415},
		{"no body, form type (an empty form)", "POST", "127.0.0.1:9090", hdr{"Content-Type": "application/x-www-form-urlencoded"}, "", false, 200},
		{"GET with a text/plain body", "GET", "127.0.0.1:9090", hdr{"Content-Type": "text/plain"}, "x", false, 200},
		{"DELETE without body", "DELETE", "127.0.0.1:9090", nil, "", false, 200},
	}
	reached := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	h := Guard([]string{"tollgate-admin.ops.svc"}, reached)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r := httptest.NewRequest(tc.method, "/admin/reload", body)
			r.Host = tc.host
			if tc.chunked {
				r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
			}
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("%s Host %q %v: %d %s, want %d", tc.method, tc.host, tc.hdr, w.Code, w.Body, tc.want)
			}
			if w.Code != 200 && w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("refusal without a problem body: %v", w.Header())
			}
		})
	}
}

// TestGuardTwoHeaderLines: a header sent twice is refused whatever its
// values: a browser may read them otherwise than the guard would.
func TestGuardTwoHeaderLines(t *testing.T) {
	h := Guard(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, name := range []string{"Origin", "Sec-Fetch-Site", "Content-Type"} {
		r := httptest.NewRequest("POST", "/admin/reload", strings.NewReader("{}"))
		r.Host = "127.0.0.1:9090"
		r.Header.Set("Content-Type", "application/json")
		good := map[string]string{"Origin": "http://127.0.0.1:9090", "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}[name]
		r.Header[name] = []string{good, good}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 403 && w.Code != 415 {
			t.Errorf("two %s lines: %d, want 403 or 415", name, w.Code)
		}
	}
}
