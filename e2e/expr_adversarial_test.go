package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
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
	// Sent as a request trailer, the header is never one: the upstream's
	// header holds the gateway's tag alone.
	conn := rawConn(t, g.Listen)
	defer conn.Close()
	_, _ = conn.Write([]byte("POST /a HTTP/1.1\r\nHost: gw.example\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n" +
		"Trailer: X-Ratelimit-Exceeded\r\n\r\n2\r\nhi\r\n0\r\nX-Ratelimit-Exceeded: forged\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Seen-Tag") != "soft" {
		t.Fatalf("tag header as a trailer: %d, upstream saw tag %q (trailer %q), want 200 and \"soft\"", resp.StatusCode, resp.Header.Get("X-Seen-Tag"), resp.Header.Get("X-Seen-Trailer"))
	}
	t.Logf("the trailer reached the upstream as %q", resp.Header.Get("X-Seen-Trailer"))
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

// TestExprBodyPeekFraming: the body a limit's expression reads reaches
// the upstream byte for byte and framed as the client framed it: with a
// Content-Length of 65,536 (read whole, offered), of 65,537 (one byte past
// the read: not offered, forwarded whole), chunked, and after
// "Expect: 100-continue" (the gateway's read sends the 100). Each is
// keyed by its body's user: offered bodies count per user (the second
// request of a user is denied), the long one falls to on_error = "skip".
func TestExprBodyPeekFraming(t *testing.T) {
	t.Parallel()
	body := `
[[limits]]
name = "login"
rates = ["1/1h"]
algorithm = "fixed_window"
key = 'body.user'
on_error = "skip"
`
	g := startExprGateway(t, "memory", body, `"login"`, "30s")
	payload := func(user string, size int) string {
		head := `{"user":"` + user + `","pad":"`
		return head + strings.Repeat("x", size-len(head)-2) + `"}`
	}
	cases := []struct {
		name, user string
		size       int
		chunked    bool
		expect     bool
		offered    bool
	}{
		{"65536, Content-Length", "u1", 64 << 10, false, false, true},
		{"65537, Content-Length", "u2", 64<<10 + 1, false, false, false},
		{"65536, chunked", "u3", 64 << 10, true, false, true},
		{"65537, chunked", "u4", 64<<10 + 1, true, false, false},
		{"small, Expect: 100-continue", "u5", 100, false, true, true},
		{"65537, Expect: 100-continue, chunked", "u6", 64<<10 + 1, true, true, false},
	}
	for _, tc := range cases {
		p := payload(tc.user, tc.size)
		sum := sha256.Sum256([]byte(p))
		wantBody := strconv.Itoa(len(p)) + ":" + hex.EncodeToString(sum[:8])
		wantFraming := strconv.Itoa(len(p))
		if tc.chunked {
			wantFraming = "-1 chunked"
		}
		var statuses []string
		for i := 0; i < 2; i++ {
			conn := rawConn(t, g.Listen)
			var b strings.Builder
			b.WriteString("POST /login HTTP/1.1\r\nHost: gw.example\r\nConnection: close\r\nContent-Type: application/json\r\n")
			if tc.chunked {
				b.WriteString("Transfer-Encoding: chunked\r\n")
			} else {
				b.WriteString("Content-Length: " + strconv.Itoa(len(p)) + "\r\n")
			}
			if tc.expect {
				b.WriteString("Expect: 100-continue\r\n")
			}
			b.WriteString("\r\n")
			if _, err := conn.Write([]byte(b.String())); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			if tc.expect {
				line, err := br.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
					t.Fatalf("%s: %q, %v, want a 100 Continue before the body is sent", tc.name, line, err)
				}
				for line != "\r\n" && err == nil {
					line, err = br.ReadString('\n')
				}
			}
			var out strings.Builder
			if tc.chunked {
				for rest := p; rest != ""; {
					n := min(len(rest), 7000)
					out.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n" + rest[:n] + "\r\n")
					rest = rest[n:]
				}
				out.WriteString("0\r\n\r\n")
			} else {
				out.WriteString(p)
			}
			if _, err := conn.Write([]byte(out.String())); err != nil {
				t.Fatal(err)
			}
			// The upstream's own 100 Continue is relayed too (a client
			// must take any number of 1xx answers): skipped.
			resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
			for err == nil && resp.StatusCode < 200 {
				resp, err = http.ReadResponse(br, &http.Request{Method: "POST"})
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			conn.Close()
			statuses = append(statuses, strconv.Itoa(resp.StatusCode))
			if resp.StatusCode == 200 && (resp.Header.Get("X-Seen-Body") != wantBody || resp.Header.Get("X-Seen-Framing") != wantFraming) {
				t.Errorf("%s: upstream saw body %q framed %q, want %q framed %q", tc.name, resp.Header.Get("X-Seen-Body"), resp.Header.Get("X-Seen-Framing"), wantBody, wantFraming)
			}
		}
		want := "200,200"
		if tc.offered {
			want = "200,429"
		}
		if got := strings.Join(statuses, ","); got != want {
			t.Errorf("%s: %s, want %s", tc.name, got, want)
		}
	}
}

// TestExprWhenQueryDodges: a when over request.query cannot be dodged by
// the readings upstreams differ on: a name repeated (PHP and many
// frameworks read the last value, the gateway the first) or pairs
// separated by ';' (Rack before 3, old Python). Every target below names
// bulk=1 in some reading, so the limit applies: the second request on a
// target's own key is denied.
func TestExprWhenQueryDodges(t *testing.T) {
	t.Parallel()
	body := `
[[limits]]
name = "bulk"
rates = ["1/1h"]
algorithm = "fixed_window"
when = 'request.query[?"bulk"].orValue("") == "1"'
key = 'request.headers["x-k"]'
`
	g := startExprGateway(t, "memory", body, `"bulk"`, "30s")
	for i, target := range []string{"/a?bulk=1", "/a?bulk=0&bulk=1", "/a?bulk=1&bulk=0", "/a?bulk=1;x=2", "/a?x=2;bulk=1",
		"/a?%62ulk=1", "/a?bulk=%31", "/a?x=1&bulk=0;bulk=1"} {
		hdr := map[string]string{"X-K": strconv.Itoa(i)}
		a, b := rawDo(t, g.Listen, "GET", target, hdr), rawDo(t, g.Listen, "GET", target, hdr)
		if a.StatusCode != 200 || b.StatusCode != 429 {
			t.Errorf("%s: %d then %d, want 200 then 429 (the limit applies)", target, a.StatusCode, b.StatusCode)
		}
	}
	// A query that names bulk=1 in no reading is not limited.
	for i := 0; i < 2; i++ {
		if r := rawDo(t, g.Listen, "GET", "/a?bulk=0&x=1;y=2", map[string]string{"X-K": "none"}); r.StatusCode != 200 {
			t.Fatalf("bulk=0: %d, want 200 (the limit does not apply)", r.StatusCode)
		}
	}
}
