package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// pathsGateway is a gateway on paths.toml.tmpl with one upstream per
// route group: public ("/", no limit), limited ("/api/expensive" and the
// GET-only "/api/report", 1/minute each) and base (the strip_prefix route
// "/pub", upstream base path "/public-api").
type pathsGateway struct {
	g                     *gw
	public, limited, base *upstream
}

func startPaths(t *testing.T) *pathsGateway {
	t.Helper()
	pg := &pathsGateway{public: newUpstream(t), limited: newUpstream(t), base: newUpstream(t)}
	pg.g = startGateway(t, "paths.toml.tmpl", gwOpts{Data: map[string]any{
		"Public": pg.public.URL, "Limited": pg.limited.URL, "Base": pg.base.URL}})
	return pg
}

// exhaust spends the one request a minute of both limited routes.
func (pg *pathsGateway) exhaust(t *testing.T) {
	t.Helper()
	for _, target := range []string{"/api/expensive", "/api/report"} {
		if r := rawDo(t, pg.g.Listen, "GET", target, nil); r.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s, want 200", target, r.StatusCode, r.Body)
		}
	}
}

// rawConn dials addr for a test that writes HTTP by hand; the connection
// gives up after 10 s.
func rawConn(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// rawDo sends one request over a fresh TCP connection with the request
// target written exactly as given (Go's client would clean or re-encode
// it) and reads the response.
func rawDo(t testing.TB, addr, method, target string, hdr map[string]string) rawResponse {
	t.Helper()
	conn := rawConn(t, addr)
	defer conn.Close()
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: gw.example\r\nConnection: close\r\n")
	for k, v := range hdr {
		b.WriteString(k + ": " + v + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: no response: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return rawResponse{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

// resolved is the path a liberal upstream serves for a request target:
// the query dropped, every escape decoded (CGI, WSGI, nginx), '\' read as
// '/' (IIS), ";params" cut from each segment (servlet containers), and
// "//", "." and ".." resolved. It is the test's own naive model, not the
// gateway's normaliser.
func resolved(target string) string {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	var dec []byte
	for i := 0; i < len(target); i++ {
		if target[i] == '%' && i+2 < len(target) {
			var v byte
			ok := true
			for _, c := range []byte(target[i+1 : i+3]) {
				switch {
				case '0' <= c && c <= '9':
					v = v<<4 | (c - '0')
				case 'a' <= c && c <= 'f':
					v = v<<4 | (c - 'a' + 10)
				case 'A' <= c && c <= 'F':
					v = v<<4 | (c - 'A' + 10)
				default:
					ok = false
				}
			}
			if ok {
				dec = append(dec, v)
				i += 2
				continue
			}
		}
		dec = append(dec, target[i])
	}
	var out []string
	for _, seg := range strings.FieldsFunc(string(dec), func(r rune) bool { return r == '/' || r == '\\' }) {
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

// checkBase fails the test when the strip_prefix route's upstream received
// a request that a liberal upstream would serve outside its base path.
func (pg *pathsGateway) checkBase(t *testing.T) {
	t.Helper()
	for _, s := range pg.base.all() {
		if p := resolved(s.RequestURI); p != "/public-api" && !strings.HasPrefix(p, "/public-api/") {
			t.Errorf("the strip_prefix upstream received %q, which resolves to %q outside its base /public-api", s.RequestURI, p)
		}
	}
}

// checkPublic fails the test when the unlimited catch-all's upstream
// received a request that a liberal upstream serves under a limited route.
func (pg *pathsGateway) checkPublic(t *testing.T) {
	t.Helper()
	for _, s := range pg.public.all() {
		if p := strings.ToLower(resolved(s.RequestURI)); strings.HasPrefix(p, "/api/expensive") || strings.HasPrefix(p, "/api/report") {
			t.Errorf("the unlimited route's upstream received %q, which resolves to the limited %q", s.RequestURI, p)
		}
	}
}

// TestPathEscapesRouteLimits: the respellings of a path that once got past
// a route's limit (each answered 200 by the unlimited catch-all) or out of
// a strip_prefix upstream's base path. Each is now counted by the route it
// resolves to (429), or rejected (400), and no upstream is reached.
func TestPathEscapesRouteLimits(t *testing.T) {
	t.Parallel()
	pg := startPaths(t)
	pg.exhaust(t)
	for _, tc := range []struct {
		method, target string
		want           []int
	}{
		// "%3F" decoded and cut as a query hid the ".." from the router.
		{"GET", "/public%3F/../api/expensive", []int{429, 400}},
		// "..%2f" resolved by the router, not by the upstream.
		{"GET", "/api/expensive/..%2f..%2fx", []int{400}},
		// Java upstreams drop ";x" and serve /api/expensive.
		{"GET", "/api/expensive;x", []int{429, 400}},
		// Case-insensitive upstreams serve /api/expensive.
		{"GET", "/API/Expensive", []int{429, 400}},
		// HEAD is a GET without the body: the GET-only route covers it.
		{"HEAD", "/api/report", []int{429}},
	} {
		r := rawDo(t, pg.g.Listen, tc.method, tc.target, nil)
		ok := false
		for _, s := range tc.want {
			ok = ok || r.StatusCode == s
		}
		if !ok {
			t.Errorf("%s %s after the route's limit was spent: %d %s, want one of %v", tc.method, tc.target, r.StatusCode, r.Body, tc.want)
		}
	}
	// strip_prefix: the ".." after a "%3F" climbed out of /public-api.
	rawDo(t, pg.g.Listen, "GET", "/pub/x%3F/../../internal/admin", nil)
	pg.checkBase(t)
	pg.checkPublic(t)
	if n := pg.limited.count(); n != 2 {
		t.Errorf("the limited upstream received %d requests, want the 2 that spent the limits", n)
	}
}

// hostilePath is one row of the "Paths" table in docs/hostile-inputs.md.
type hostilePath struct {
	request string // "METHOD target", as in the document
	status  int
	// upstream names the upstream that must receive the request ("public"
	// or "base") and uri the request target it must receive; both empty
	// when no upstream may be reached.
	upstream, uri string
}

// hostilePaths mirrors the "Paths" table of docs/hostile-inputs.md row for
// row (TestHostileInputsDocumented keeps the two in step). The limited
// routes' budgets are spent first, so 429 means "counted by the limited
// route the path resolves to".
var hostilePaths = []hostilePath{
	{"GET /api%2Fexpensive", 400, "", ""},
	{"GET /api/expensive/a%2Fb", 429, "", ""},
	{"GET /files/a%2fb", 200, "public", "/files/a%2Fb"},
	{"GET /api/expensive/..%2f..%2fx", 400, "", ""},
	{"GET /files/%2F../api/expensive", 400, "", ""},
	{"GET /public%3F/../api/expensive", 429, "", ""},
	{"GET /files/a%3fb", 200, "public", "/files/a%3Fb"},
	{"GET /api/%2e%2e/api/expensive", 429, "", ""},
	{"GET /api/expensive/%2E%2E/.%2e/files", 200, "public", "/files"},
	{"GET /api/%65xpensive", 429, "", ""},
	{"GET /files/caf%c3%a9", 200, "public", "/files/caf%C3%A9"},
	{"GET /files/café", 200, "public", "/files/caf%C3%A9"},
	{"GET /files/{x}", 200, "public", "/files/%7Bx%7D"},
	{"GET /files/%252e%252e/x", 200, "public", "/files/%252e%252e/x"},
	{"GET /api/expensive;x", 400, "", ""},
	{"GET /api;x/expensive", 400, "", ""},
	{"GET /api/expensive%3Bx", 400, "", ""},
	{"GET /api/expensive/a;b", 429, "", ""},
	{"GET /files/..;/api/expensive", 400, "", ""},
	{"GET /files/a;b", 200, "public", "/files/a;b"},
	{"GET /API/Expensive", 400, "", ""},
	{"GET /api/EXPENSIVE/x", 400, "", ""},
	{"GET /api/expensive/ABC", 429, "", ""},
	{"GET /Files/X", 200, "public", "/Files/X"},
	{"GET //api//expensive", 429, "", ""},
	{"GET /api/./expensive/.", 429, "", ""},
	{"GET /../../api/expensive", 429, "", ""},
	{"GET /files/x/..", 200, "public", "/files/"},
	{"GET /api\\expensive", 400, "", ""},
	{"GET /files/..%5capi", 400, "", ""},
	{"GET /api/expensive%00", 400, "", ""},
	{"GET /files/a%0Ab", 400, "", ""},
	{"GET *", 400, "", ""},
	{"OPTIONS *", 200, "", ""},
	{"GET http://other.example/api/expensive", 429, "", ""},
	{"HEAD /api/report", 429, "", ""},
	{"CONNECT 127.0.0.1:1", 405, "", ""},
	{"GET /pub/x%3F/../../internal/admin", 200, "public", "/internal/admin"},
	{"GET /pub/%2e%2e/%2e%2e/internal", 200, "public", "/internal"},
	{"GET /pub/..%2F..%2Finternal", 400, "", ""},
	{"GET /pub/docs/a%2Fb?q=1", 200, "base", "/public-api/docs/a%2Fb?q=1"},
	{"GET /pub", 200, "base", "/public-api/"},
}

// TestHostilePaths runs the "Paths" table of docs/hostile-inputs.md
// through the binary: each respelling gets the documented status and, when
// forwarded, reaches the documented upstream with the documented target.
func TestHostilePaths(t *testing.T) {
	t.Parallel()
	pg := startPaths(t)
	pg.exhaust(t)
	ups := map[string]*upstream{"public": pg.public, "base": pg.base}
	for _, row := range hostilePaths {
		method, target, _ := strings.Cut(row.request, " ")
		before := map[string]int{"public": pg.public.count(), "base": pg.base.count(), "limited": pg.limited.count()}
		r := rawDo(t, pg.g.Listen, method, target, nil)
		if r.StatusCode != row.status {
			t.Errorf("%s: status %d %s, want %d", row.request, r.StatusCode, r.Body, row.status)
			continue
		}
		if r.StatusCode >= 400 && method != "HEAD" && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d without a problem body: %q %s", row.request, r.StatusCode, r.Header.Get("Content-Type"), r.Body)
		}
		for name, u := range map[string]*upstream{"public": pg.public, "base": pg.base, "limited": pg.limited} {
			n := u.count() - before[name]
			switch {
			case name == row.upstream && n != 1:
				t.Errorf("%s: the %s upstream received %d requests, want 1", row.request, name, n)
			case name != row.upstream && n != 0:
				t.Errorf("%s: the %s upstream received %d requests, want none", row.request, name, n)
			}
		}
		if u := ups[row.upstream]; u != nil {
			all := u.all()
			if got := all[len(all)-1].RequestURI; got != row.uri {
				t.Errorf("%s: upstream received %q, want %q", row.request, got, row.uri)
			}
		}
	}
	pg.checkBase(t)
	pg.checkPublic(t)
}

// hostileHeaders mirrors the "Headers" table of docs/hostile-inputs.md:
// headers a client sends that must not reach the upstream, whatever their
// spelling.
var hostileHeaders = []string{
	"X-Real-IP", "X_Real_IP", "x_real_ip", "X-Real_Ip",
	"X-Client-IP", "X_Client_IP",
	"True-Client-IP", "True_Client_IP",
	"CF-Connecting-IP", "Cf_Connecting_Ip",
	"X-User-ID", "X_User_ID", "x-user_id",
	"X-Gateway-User", "X_Gateway_User",
	"X-Consumer-ID", "X_Consumer_ID",
	"X_Forwarded_For", "X_Forwarded_Host", "X_Forwarded_Proto", "Forwarded",
	"X-Original-URL", "X_Original_URL", "X-Rewrite-URL",
	"X-HTTP-Method-Override", "X_HTTP_Method_Override", "X-HTTP-Method", "X-Method-Override",
}

// TestHostileHeaders: from an untrusted peer, each spelling of a
// gateway-owned header is stripped; the same name with '_' for '-' poses
// as the real one to CGI, WSGI and PHP upstreams (HTTP_X_REAL_IP), so it
// is stripped too.
func TestHostileHeaders(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "identity.toml.tmpl", gwOpts{
		Data: map[string]any{"Upstream": up.URL, "Trusted": `["127.0.0.9/32"]`, "ExemptIPs": `["127.0.0.1/32"]`},
	})
	c := newClient(t, "")
	for _, h := range hostileHeaders {
		r := get(t, c, g.url("/api/h"), map[string]string{h: "6.6.6.6", "X-Kept": "yes"})
		if r.Status != 200 {
			t.Fatalf("%s: %s", h, r)
		}
		s := r.echo(t)
		if s.Header.Get("X-Kept") != "yes" {
			t.Errorf("%s: an end-to-end header was dropped: %v", h, s.Header)
		}
		for k, vs := range s.Header {
			for _, v := range vs {
				if strings.Contains(v, "6.6.6.6") {
					t.Errorf("client header %s reached the upstream as %s: %q", h, k, v)
				}
			}
		}
	}
}

// TestHostileInputsDocumented keeps docs/hostile-inputs.md and the tables
// above in step: every row of the document's Paths and Headers tables is a
// row of a test, and every test row is in the document.
func TestHostileInputsDocumented(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "hostile-inputs.md"))
	if err != nil {
		t.Fatal(err)
	}
	var paths, hdrs []string
	for _, row := range hostilePaths {
		paths = append(paths, row.request)
	}
	hdrs = append(hdrs, hostileHeaders...)
	for _, tc := range []struct {
		section string
		rows    []string
	}{{"Paths", paths}, {"Headers", hdrs}} {
		got := docColumn(t, string(doc), tc.section)
		want := append([]string(nil), tc.rows...)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("section %q of docs/hostile-inputs.md lists\n  %q\nbut the test runs\n  %q", tc.section, got, want)
		}
	}
}

// docColumn returns the first-column code spans of the table rows in the
// "## section" of a Markdown document (one per row; "\|" is a '|').
func docColumn(t *testing.T, doc, section string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+section+"\n")
	if !ok {
		t.Fatalf("no section %q", section)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.ReplaceAll(line[3:], `\|`, "|"), "` |")
		out = append(out, strings.Split(cell, "`, `")...)
	}
	return out
}
