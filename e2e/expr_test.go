package e2e

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// echoUpstream answers every request 200 with what the gateway forwarded
// that the tests look at: the tag header's values and the body's length
// and SHA-256.
func echoUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(b)
		w.Header().Set("X-Seen-Tag", strings.Join(r.Header.Values("X-Ratelimit-Exceeded"), ","))
		w.Header().Set("X-Seen-Trailer", strings.Join(r.Trailer.Values("X-Ratelimit-Exceeded"), ","))
		for name, vs := range r.Header {
			if strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "X-Ratelimit-Exceeded") && name != "X-Ratelimit-Exceeded" {
				w.Header().Set("X-Seen-Respelled", name+"="+strings.Join(vs, ","))
			}
		}
		w.Header().Set("X-Seen-Body", strconv.Itoa(len(b))+":"+hex.EncodeToString(sum[:8]))
		w.Header().Set("X-Seen-Framing", strconv.FormatInt(r.ContentLength, 10)+" "+strings.Join(r.TransferEncoding, ","))
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// startExprGateway starts expr.toml.tmpl with the limits body (names
// listed in limits) on backend ("memory" or "redis").
func startExprGateway(t *testing.T, backend, body, limits, timeout string) *gw {
	t.Helper()
	data := map[string]any{"Body": body, "Limits": limits, "Upstream": echoUpstream(t), "Redis": "", "Timeout": timeout}
	if backend == "redis" {
		rs := redistest.Standalone(t)
		data["Redis"], data["Prefix"] = rs.Addr, "expr:"
	}
	return startGateway(t, "expr.toml.tmpl", gwOpts{Data: data})
}

// send sends one request and reads the answer.
func send(t *testing.T, c *http.Client, method, url string, hdr map[string]string, body string) *response {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	r, err := tryDo(c, method, url, hdr, b)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// statusList is the statuses of a sequence of answers, for messages.
func statusList(rs ...*response) string {
	var s []string
	for _, r := range rs {
		s = append(s, strconv.Itoa(r.Status))
	}
	return strings.Join(s, ",")
}

func backends(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range []string{"memory", "redis"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// TestExprWhenKeyCost: when picks the requests a limit applies to, key
// keys it by a header (another tenant has its own budget, a request
// without the header shares one counter with every other such request
// under on_error = "shared"), cost_expr charges what the header says and
// a malformed one is answered 400 under on_error = "deny".
func TestExprWhenKeyCost(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "orders"
rates = ["2/1h"]
algorithm = "fixed_window"
when = 'request.method == "POST" && request.path.startsWith("/v1/orders")'
key = 'request.headers["x-tenant"]'

[[limits]]
name = "batch"
rates = ["10/1h"]
algorithm = "fixed_window"
when = 'request.path == "/v1/batch"'
key = 'request.headers["x-tenant"]'
cost_expr = 'int(request.headers["x-batch"])'
on_error = "deny"
`
		g := startExprGateway(t, backend, body, `"orders", "batch"`, "30s")
		c := newClient(t, "")
		a := map[string]string{"X-Tenant": "a"}
		bb := map[string]string{"X-Tenant": "b"}
		for i := 0; i < 5; i++ {
			if r := send(t, c, "GET", g.url("/v1/orders/1"), a, ""); r.Status != 200 {
				t.Fatalf("GET %d (when is false): %s", i, r)
			}
		}
		r1, r2, r3 := send(t, c, "POST", g.url("/v1/orders"), a, "{}"), send(t, c, "POST", g.url("/v1/orders/x"), a, "{}"), send(t, c, "POST", g.url("/v1/orders"), a, "{}")
		if statusList(r1, r2, r3) != "200,200,429" {
			t.Fatalf("tenant a's POSTs: %s, want 200,200,429", statusList(r1, r2, r3))
		}
		if !strings.Contains(r3.Header.Get("RateLimit"), `"orders"`) {
			t.Errorf("429 RateLimit %q, want the orders limit", r3.Header.Get("RateLimit"))
		}
		if r := send(t, c, "POST", g.url("/v1/orders"), bb, "{}"); r.Status != 200 {
			t.Fatalf("tenant b's first POST: %s", r)
		}
		// The admin API names an expression's counter by its value.
		if u := limitUsage(t, g, "", "orders", "&expr=a"); u.Windows[0].Used != 2 {
			t.Errorf("admin usage of orders expr=a: %+v, want 2 used", u.Windows[0])
		}
		if u := limitUsage(t, g, "", "orders", "&expr=b"); u.Windows[0].Used != 1 {
			t.Errorf("admin usage of orders expr=b: %+v, want 1 used", u.Windows[0])
		}
		// No x-tenant: the expression fails; on_error = "shared" counts
		// every such request on one counter.
		n1, n2, n3 := send(t, c, "POST", g.url("/v1/orders"), nil, ""), send(t, c, "POST", g.url("/v1/orders"), nil, ""), send(t, c, "POST", g.url("/v1/orders"), map[string]string{"X-Other": "1"}, "")
		if statusList(n1, n2, n3) != "200,200,429" {
			t.Fatalf("POSTs without x-tenant: %s, want 200,200,429 (one shared counter)", statusList(n1, n2, n3))
		}

		ab := func(n string) map[string]string { return map[string]string{"X-Tenant": "a", "X-Batch": n} }
		b1, b2, b3 := send(t, c, "GET", g.url("/v1/batch"), ab("4"), ""), send(t, c, "GET", g.url("/v1/batch"), ab("4"), ""), send(t, c, "GET", g.url("/v1/batch"), ab("4"), "")
		if statusList(b1, b2, b3) != "200,200,429" {
			t.Fatalf("batches of 4 on 10/1h: %s, want 200,200,429", statusList(b1, b2, b3))
		}
		if !strings.Contains(b2.Header.Get("RateLimit"), "r=2") {
			t.Errorf("after 8 units RateLimit %q, want r=2", b2.Header.Get("RateLimit"))
		}
		if r := send(t, c, "GET", g.url("/v1/batch"), ab("2"), ""); r.Status != 200 {
			t.Fatalf("a batch of 2 with 2 left: %s", r)
		}
		for _, bad := range []string{"abc", "0", "-3", "99999999999999999999"} {
			r := send(t, c, "GET", g.url("/v1/batch"), map[string]string{"X-Tenant": "c", "X-Batch": bad}, "")
			if r.Status != 400 || !strings.Contains(string(r.Body), "cost_expr") {
				t.Errorf("x-batch %q under on_error = deny: %s, want 400 naming cost_expr", bad, r)
			}
		}
	})
}

// TestExprBody: a key read from the JSON body (the username a credential
// stuffer varies) limits per value, the body reaches the upstream intact,
// and a body that is not JSON, or a content type that is not, skips the
// limit under on_error = "skip".
func TestExprBody(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "login"
rates = ["2/1h"]
algorithm = "fixed_window"
when = 'request.path == "/login"'
key = 'body.user'
on_error = "skip"
`
		g := startExprGateway(t, backend, body, `"login"`, "30s")
		c := newClient(t, "")
		js := map[string]string{"Content-Type": "application/json"}
		payload := `{"user":"alice","password":"` + strings.Repeat("x", 3000) + `"}`
		sum := sha256.Sum256([]byte(payload))
		want := strconv.Itoa(len(payload)) + ":" + hex.EncodeToString(sum[:8])
		var got []*response
		for i := 0; i < 3; i++ {
			got = append(got, send(t, c, "POST", g.url("/login"), js, payload))
		}
		if statusList(got...) != "200,200,429" {
			t.Fatalf("alice's logins: %s, want 200,200,429", statusList(got...))
		}
		if s := got[0].Header.Get("X-Seen-Body"); s != want {
			t.Fatalf("upstream saw body %q, want %q (forwarded intact)", s, want)
		}
		if r := send(t, c, "POST", g.url("/login"), js, `{"user":"bob"}`); r.Status != 200 {
			t.Fatalf("bob's login: %s", r)
		}
		for _, tc := range []struct{ ct, body string }{
			{"application/json", `{"user":`},
			{"text/plain", `{"user":"alice"}`},
			{"application/json", `["not", "an", "object"]`},
		} {
			r := send(t, c, "POST", g.url("/login"), map[string]string{"Content-Type": tc.ct}, tc.body)
			if r.Status != 200 {
				t.Errorf("%s %q (skip): %s, want 200", tc.ct, tc.body, r)
			}
		}
		// A body larger than the 64 KiB read for expressions is not
		// offered to them, and is forwarded whole.
		big := `{"user":"alice","pad":"` + strings.Repeat("y", 100_000) + `"}`
		sum = sha256.Sum256([]byte(big))
		r := send(t, c, "POST", g.url("/login"), js, big)
		if r.Status != 200 || r.Header.Get("X-Seen-Body") != strconv.Itoa(len(big))+":"+hex.EncodeToString(sum[:8]) {
			t.Fatalf("a 100 kB body: %s (seen %q), want 200 and the whole body upstream", r, r.Header.Get("X-Seen-Body"))
		}
	})
}

// TestLimitResponse: a limit's own answer replaces the 429: its status,
// body template and headers, with Retry-After and the RateLimit headers
// kept.
func TestLimitResponse(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "own"
rates = ["1/1h"]
algorithm = "fixed_window"
response = { status = 503, body = 'busy: {limit}, back in {retry_after}s {x}', content_type = "text/plain", headers = { "X-Why" = "quota" } }
`
		g := startExprGateway(t, backend, body, `"own"`, "30s")
		c := newClient(t, "")
		if r := get(t, c, g.url("/a"), nil); r.Status != 200 {
			t.Fatalf("first: %s", r)
		}
		r := get(t, c, g.url("/a"), nil)
		ra := r.Header.Get("Retry-After")
		n, _ := strconv.Atoi(ra)
		if r.Status != 503 || n < 1 || n > 3600 {
			t.Fatalf("second: %s, want 503 with Retry-After 1..3600", r)
		}
		if want := "busy: own, back in " + ra + "s {x}"; string(r.Body) != want {
			t.Errorf("body %q, want %q", r.Body, want)
		}
		if r.Header.Get("X-Why") != "quota" || r.Header.Get("Content-Type") != "text/plain" || !strings.Contains(r.Header.Get("RateLimit"), `"own";r=0`) {
			t.Errorf("headers %v: want X-Why, Content-Type text/plain and RateLimit kept", r.Header)
		}
	})
}

// TestLimitModeTag: a tag limit never denies; a request over it is
// forwarded with X-RateLimit-Exceeded naming it, and a client's own copy
// of that header never reaches the upstream.
func TestLimitModeTag(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "soft"
rates = ["2/1h"]
algorithm = "fixed_window"
mode = "tag"
`
		g := startExprGateway(t, backend, body, `"soft"`, "30s")
		c := newClient(t, "")
		spoof := map[string]string{"X-RateLimit-Exceeded": "forged"}
		for i := 0; i < 5; i++ {
			r := get(t, c, g.url("/a"), spoof)
			want := ""
			if i >= 2 {
				want = "soft"
			}
			if r.Status != 200 || r.Header.Get("X-Seen-Tag") != want {
				t.Fatalf("request %d: %s, upstream saw tag %q, want 200 and %q", i+1, r, r.Header.Get("X-Seen-Tag"), want)
			}
		}
		// The dashboard says what the limit is.
		if r := adminDo(t, g, "GET", "/admin/ui/data", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"name":"soft","algorithm":"fixed_window","shadow":true`) || !strings.Contains(string(r.Body), `"mode":"tag"`) {
			t.Errorf("GET /admin/ui/data: %s, want the soft limit in mode tag", r)
		}
	})
}

// TestEnforcePercent: at 50% some keys are enforced and the others only
// shadowed, each key staying on its side; raised to 100% by a reload,
// every key is enforced on the counts made so far (nothing reset); at 0%
// no key is.
func TestEnforcePercent(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		lim := func(p int) string {
			return fmt.Sprintf("[[limits]]\nname = \"roll\"\nrates = [\"1/1h\"]\nalgorithm = \"fixed_window\"\nby = [\"header:X-User\"]\nenforce_percent = %d\n", p)
		}
		g := startExprGateway(t, backend, lim(50), `"roll"`, "30s")
		c := newClient(t, "")
		if r := adminDo(t, g, "GET", "/admin/ui/data", ""); !strings.Contains(string(r.Body), `"enforce_percent":50`) {
			t.Errorf("GET /admin/ui/data: %s, want enforce_percent 50 shown", r)
		}
		const users = 40
		enforced := map[int]bool{}
		for u := 0; u < users; u++ {
			h := map[string]string{"X-User": "u" + strconv.Itoa(u)}
			if r := get(t, c, g.url("/a"), h); r.Status != 200 {
				t.Fatalf("user %d first: %s", u, r)
			}
			r := get(t, c, g.url("/a"), h)
			enforced[u] = r.Status == 429
			if again := get(t, c, g.url("/a"), h); (again.Status == 429) != enforced[u] {
				t.Fatalf("user %d: second %d, third %d: a key must stay on its side", u, r.Status, again.Status)
			}
		}
		n := 0
		for _, e := range enforced {
			if e {
				n++
			}
		}
		if n == 0 || n == users {
			t.Fatalf("%d of %d users enforced at 50%%, want some on each side", n, users)
		}
		before := time.Now()
		g.rewrite(t, map[string]any{"Body": lim(100)})
		if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
			t.Fatalf("reload: %s", r)
		}
		waitReload(t, g, before)
		for u := 0; u < users; u++ {
			if r := get(t, c, g.url("/a"), map[string]string{"X-User": "u" + strconv.Itoa(u)}); r.Status != 429 {
				t.Fatalf("user %d at 100%%: %s, want 429 on the counts made at 50%%", u, r)
			}
		}
		before = time.Now()
		g.rewrite(t, map[string]any{"Body": lim(0)})
		if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
			t.Fatalf("reload: %s", r)
		}
		waitReload(t, g, before)
		for u := 0; u < users; u++ {
			if r := get(t, c, g.url("/a"), map[string]string{"X-User": "u" + strconv.Itoa(u)}); r.Status != 200 {
				t.Fatalf("user %d at 0%%: %s, want 200", u, r)
			}
		}
	})
}

// TestRetryAfterJitter: clients denied together are told different waits
// (spread over the jitter), each client the same one within the window,
// and RateLimit's t agrees with Retry-After.
func TestRetryAfterJitter(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "j"
rates = ["1/1h"]
algorithm = "fixed_window"
by = ["header:X-User"]
retry_after_jitter = "600s"
`
		g := startExprGateway(t, backend, body, `"j"`, "30s")
		c := newClient(t, "")
		lo, hi := 1<<30, 0
		for u := 0; u < 20; u++ {
			h := map[string]string{"X-User": "u" + strconv.Itoa(u)}
			get(t, c, g.url("/a"), h)
			r1, r2 := get(t, c, g.url("/a"), h), get(t, c, g.url("/a"), h)
			a, _ := strconv.Atoi(r1.Header.Get("Retry-After"))
			b, _ := strconv.Atoi(r2.Header.Get("Retry-After"))
			if r1.Status != 429 || a < 1 || a > 3600+600 || a-b > 1 || b > a {
				t.Fatalf("user %d: %s then Retry-After %d: want 429 with one wait, stable", u, r1, b)
			}
			if !strings.Contains(r2.Header.Get("RateLimit"), "t="+strconv.Itoa(b)) {
				t.Errorf("user %d: RateLimit %q, Retry-After %d: t must agree", u, r2.Header.Get("RateLimit"), b)
			}
			lo, hi = min(lo, a), max(hi, a)
		}
		if hi-lo < 10 {
			t.Fatalf("20 clients denied together were told %d..%d s: want them spread over the 600 s jitter", lo, hi)
		}
	})
}

// TestExprValidate: validate names the field path and the CEL error of
// an expression that does not compile or has the wrong type, and of
// every new setting out of range.
func TestExprValidate(t *testing.T) {
	t.Parallel()
	cases := []struct{ limit, want string }{
		{`when = 'request.nope == "x"'`, "limits[0].when: ERROR: <input>:1:1: undeclared reference to 'request'"},
		{`when = 'request.method'`, "limits[0].when: has type string, want bool"},
		{`key = 'request.headers['`, "limits[0].key: ERROR: <input>:1:"},
		{`cost_expr = '"x"'`, "limits[0].cost_expr: has type string, want int"},
		{`on_error = "explode"`, "limits[0].on_error: unknown value"},
		{`response = { status = 302 }`, "limits[0].response.status: must be in 400..599"},
		{`response = { headers = { "Retry-After" = "1" } }`, "limits[0].response.headers.retry-after: is a rate-limit header the gateway owns"},
		{`response = { headers = { "Connection" = "close" } }`, "limits[0].response.headers.connection: is a header the gateway owns"},
		{`enforce_percent = 101`, "limits[0].enforce_percent: must be in 0..100"},
		{`mode = "tag"` + "\n" + `tag_header = "X-Forwarded-For"`, "limits[0].tag_header"},
		{`retry_after_jitter = "2h"`, "limits[0].retry_after_jitter"},
	}
	for i, tc := range cases {
		cfg := "[server]\nlisten = \"127.0.0.1:1\"\n\n[[limits]]\nname = \"l\"\nrates = [\"1/s\"]\n" + tc.limit +
			"\n\n[[routes]]\nname = \"r\"\nrespond = { status = 200, body = \"ok\" }\nlimits = [\"l\"]\n"
		path := filepath.Join(t.TempDir(), "g.toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := runGateway(t, nil, "validate", "--config", path)
		if code != 2 || !strings.Contains(stderr+out, tc.want) {
			t.Errorf("case %d (%s): exit %d, output:\n%s%s\nwant exit 2 and %q", i, tc.limit, code, out, stderr, tc.want)
		}
	}
}

// TestExprHostileBody: a limit reading the body, against bodies that do
// not cooperate: one that never finishes arriving is answered 408 when the
// route's timeout runs out (the gateway does not wait on it forever), one
// nested 30,000 deep, and a chunked one larger than the 64 KiB read, each
// skip the limit (on_error = "skip") and reach the upstream whole.
func TestExprHostileBody(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "login"
rates = ["1/1h"]
algorithm = "fixed_window"
key = 'body.user'
on_error = "skip"
`
		g := startExprGateway(t, backend, body, `"login"`, "1s")
		conn, err := net.DialTimeout("tcp", g.Listen, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
		_, _ = io.WriteString(conn, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"user\":")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("a body that never ends: %v, want an answer", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a body that never ends: %d, want 408", resp.StatusCode)
		}

		c := newClient(t, "")
		js := map[string]string{"Content-Type": "application/json"}
		deep := strings.Repeat("[", 30_000) + strings.Repeat("]", 30_000)
		for i := 0; i < 3; i++ {
			if r := send(t, c, "POST", g.url("/login"), js, deep); r.Status != 200 || !strings.HasPrefix(r.Header.Get("X-Seen-Body"), "60000:") {
				t.Fatalf("deep JSON %d: %s (upstream saw %q), want 200 and the whole body", i, r, r.Header.Get("X-Seen-Body"))
			}
		}
		// Chunked (no Content-Length), larger than the read.
		pr, pw := io.Pipe()
		go func() {
			_, _ = io.WriteString(pw, `{"user":"x","pad":"`)
			for i := 0; i < 100; i++ {
				_, _ = io.WriteString(pw, strings.Repeat("z", 1000))
			}
			_, _ = io.WriteString(pw, `"}`)
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", g.url("/login"), pr)
		req.Header.Set("Content-Type", "application/json")
		resp, err = c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("X-Seen-Body"), "100021:") {
			t.Fatalf("chunked 100 kB body: %d (upstream saw %q), want 200 and the whole body", resp.StatusCode, resp.Header.Get("X-Seen-Body"))
		}
	})
}

// signClaims signs an HS256 token whose payload is claims (JSON).
func signClaims(secret, claims string) string {
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims))
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(m.Sum(nil))
}

// TestExprJWTClaims: a key from a verified token's claim puts every user
// of an organisation on one counter; a token signed with another secret
// has no claims to read (the limit is skipped under on_error = "skip")
// and counts nothing for the organisation it names.
func TestExprJWTClaims(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "per-org"
rates = ["2/1h"]
algorithm = "fixed_window"
key = 'jwt.claims.org'
on_error = "skip"
`
		data := map[string]any{"Body": body, "Limits": `"per-org"`, "Upstream": echoUpstream(t), "Redis": "", "Timeout": "30s", "JWT": true}
		if backend == "redis" {
			rs := redistest.Standalone(t)
			data["Redis"], data["Prefix"] = rs.Addr, "exprjwt:"
		}
		const secret = "e2e-secret-for-claims-0123456789abcdef"
		g := startGateway(t, "expr.toml.tmpl", gwOpts{Data: data, Env: []string{"E2E_JWT_SECRET=" + secret}})
		c := newClient(t, "")
		exp := time.Now().Add(time.Hour).Unix()
		tok := func(secret, sub, org string) map[string]string {
			return map[string]string{"Authorization": "Bearer " + signClaims(secret, fmt.Sprintf(`{"sub":%q,"org":%q,"exp":%d}`, sub, org, exp))}
		}
		a1, a2 := get(t, c, g.url("/x"), tok(secret, "u1", "acme")), get(t, c, g.url("/x"), tok(secret, "u1", "acme"))
		a3 := get(t, c, g.url("/x"), tok(secret, "u2", "acme"))
		if statusList(a1, a2, a3) != "200,200,429" {
			t.Fatalf("two users of acme: %s, want 200,200,429 (one counter per organisation)", statusList(a1, a2, a3))
		}
		for i := 0; i < 3; i++ {
			if r := get(t, c, g.url("/x"), tok("forged", "u9", "beta")); r.Status != 200 {
				t.Fatalf("forged token %d: %s, want 200 (no claims: the limit is skipped)", i, r)
			}
		}
		b1, b2, b3 := get(t, c, g.url("/x"), tok(secret, "u3", "beta")), get(t, c, g.url("/x"), tok(secret, "u3", "beta")), get(t, c, g.url("/x"), tok(secret, "u3", "beta"))
		if statusList(b1, b2, b3) != "200,200,429" {
			t.Fatalf("beta after forged tokens: %s, want 200,200,429 (forged tokens counted nothing)", statusList(b1, b2, b3))
		}
	})
}

// TestExprBodyOnlyWhenApplies: a limit keyed by a body field whose when
// does not read the body does not wait for the body of a request it does
// not apply to: that request is forwarded at once, and its body streams
// to the upstream as it arrives.
func TestExprBodyOnlyWhenApplies(t *testing.T) {
	t.Parallel()
	body := `
[[limits]]
name = "login"
rates = ["1/1h"]
algorithm = "fixed_window"
when = 'request.path == "/login"'
key = 'body.user'
`
	seen := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path // the upstream has the request before its body is complete
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, strconv.Itoa(len(b)))
	}))
	t.Cleanup(up.Close)
	g := startGateway(t, "expr.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Limits": `"login"`, "Upstream": up.URL, "Redis": "", "Timeout": "30s"}})
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", g.url("/upload"), pr)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := newClient(t, "").Do(req)
		if err == nil {
			done <- resp
		}
	}()
	_, _ = io.WriteString(pw, `{"user":"x",`)
	select {
	case p := <-seen:
		if p != "/upload" {
			t.Fatalf("upstream saw %q", p)
		}
	case <-time.After(20 * time.Second): // hang guard
		t.Fatal("the request was held for its body although the limit does not apply to it")
	}
	_, _ = io.WriteString(pw, `"pad":1}`)
	pw.Close()
	select {
	case resp := <-done:
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "20" {
			t.Fatalf("answer %d %q, want 200 and the 20-byte body upstream", resp.StatusCode, b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
	}
}
