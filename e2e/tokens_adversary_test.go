package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/internal/testupstream"
)

// TestTokenGzipDodge: a client must not choose to leave its usage
// unread. Asking for a compressed answer (Accept-Encoding: gzip) made the
// upstream send one the gateway did not decode, so the answer had no
// usage and on_missing_usage counted the estimate (max_tokens, which
// total_tokens exceeds by the whole prompt) or, on a budget that does not
// reserve, the request's cost of 1. On a route whose limits read the
// answer's body the gateway now drops the client's Accept-Encoding: its
// own transport asks for gzip and decodes, the usage is read, and the
// client gets the answer uncompressed.
func TestTokenGzipDodge(t *testing.T) {
	t.Parallel()
	g, _, _ := tokensGateway(t, "", "fixed_window", "100000/24h")
	c := newClient(t, "")
	for i, ae := range []string{"gzip", "gzip, br, zstd", "br"} {
		key := fmt.Sprintf("gzdodge-%d", i)
		r := chat(t, c, g.url("/v1/chat"), 50, map[string]string{"X-API-Key": key, "X-Usage": "700", "X-Gzip": "1", "Accept-Encoding": ae})
		if r.Status != 200 || r.Header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %q: %s; want 200, decoded", ae, r)
		}
		waitTokens(t, g, "tokens", key, 700)
		r = chat(t, c, g.url("/peek/chat"), -1, map[string]string{"X-API-Key": key, "X-Usage": "300", "X-Gzip": "1", "Accept-Encoding": ae})
		if r.Status != 200 || r.Header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %q, peek: %s; want 200, decoded", ae, r)
		}
		waitTokens(t, g, "peek-tokens", key, 300)
	}
}

// TestTokenUpgrade: a token budget on a route that allows WebSocket
// upgrades. The body scanner wrapped every answer's body, a 101's too,
// and ReverseProxy refuses to tunnel through a body it cannot write to:
// every upgrade failed with 502. A 101 is now passed on unwrapped (a
// tunnel has no usage: on_missing_usage decides).
func TestTokenUpgrade(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "tokens_adv.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": scriptedLLM(t)}})
	conn := rawConn(t, g.Listen)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET /realtime/x HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", g.Listen)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		t.Fatalf("websocket through a token budget: %d %q, want 101", resp.StatusCode, b)
	}
	fmt.Fprint(conn, "hello\n")
	if got, err := br.ReadString('\n'); err != nil || got != "echo hello\n" {
		t.Fatalf("through the tunnel: %q, %v", got, err)
	}
}

// TestTokenConcurrentReservationsCluster: the reservation invariant of
// TestTokenConcurrentReservations on a Redis Cluster (the budget's key on
// one master, the settle a mode of the same function library loaded on
// every master): 50 requests at once reserving 100 of 1000 tokens admit
// at most ten, and after settling the remaining budget is the limit
// minus the usage reported.
func TestTokenConcurrentReservationsCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.Cluster(t)
	u, url := startLLM(t)
	body := fmt.Sprintf(`
[[limits]]
name = "tokens"
algorithm = "fixed_window"
rates = ["1000/24h"]
by = ["api_key"]
count = "response"
cost_request_json = "max_tokens"
cost_response_json = "usage.total_tokens"

[[routes]]
name = "llm"
path_prefix = "/v1"
upstream = %q
limits = ["tokens"]
`, url)
	if left := 24*time.Hour - time.Duration(time.Now().UTC().UnixNano()%int64(24*time.Hour)); left < 2*time.Minute {
		time.Sleep(left + time.Second)
	}
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData("", cl.Addrs(), "deny", "2s", body)})
	n := reserveAtOnce(t, g, u, "cl")
	waitTokens(t, g, "tokens", "cl", 37*n)
	if _, rem := used(t, g, "tokens", "cl"); rem != 1000-37*n {
		t.Errorf("remaining %d, want %d", rem, 1000-37*n)
	}
	t.Logf("%d admitted at once", n)
}

// scriptedAnswers are scriptedLLM's answers by X-Case: a content type,
// a status and a raw body ("reset": the connection is closed without an
// answer).
var scriptedAnswers = map[string]struct {
	ctype  string
	status int
	body   string
}{
	"json":             {"application/json", 200, `{"usage":{"total_tokens":9}}`},
	"after done":       {"text/event-stream", 200, "data: [DONE]\n\ndata: {\"usage\":{\"total_tokens\":9}}\n\n"},
	"crlf no space":    {"text/event-stream", 200, "data:{\"usage\":{\"total_tokens\":9}}\r\n\r\ndata:[DONE]\r\n\r\n"},
	"multi-line":       {"text/event-stream", 200, "data: {\"usage\":\n: a comment\ndata: {\"total_tokens\":9}}\n\n"},
	"sse 2^63":         {"text/event-stream", 200, "data: {\"usage\":{\"total_tokens\":9223372036854775808}}\n\n"},
	"sse 1e400":        {"text/event-stream", 200, "data: {\"usage\":{\"total_tokens\":1e400}}\n\n"},
	"sse -1":           {"text/event-stream", 200, "data: {\"usage\":{\"total_tokens\":-1}}\n\n"},
	"json string":      {"application/json", 200, `{"usage":{"total_tokens":"9"}}`},
	"json 2^63":        {"application/json", 200, `{"usage":{"total_tokens":9223372036854775807}}`},
	"path repeated":    {"application/json", 200, `{"usage":{"total_tokens":3},"x":{"usage":{"total_tokens":5}},"usage":{"total_tokens":9}}`},
	"204":              {"application/json", 204, ""},
	"304":              {"application/json", 304, ""},
	"504":              {"application/json", 504, `{"usage":{"total_tokens":9}}`},
	"reset":            {"", 0, ""},
	"sse not finished": {"text/event-stream", 200, "data: {\"usage\":{\"total_tokens\":9}}\n"},
}

// scriptedLLM starts an upstream answering scriptedAnswers[X-Case], and
// WebSocket upgrades with a line echo; it returns its URL.
func scriptedLLM(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("Upgrade") != "" {
			testupstream.EchoTunnel(w)
			return
		}
		a, ok := scriptedAnswers[r.Header.Get("X-Case")]
		if !ok {
			http.Error(w, "no such case", 500)
			return
		}
		if a.status == 0 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", a.ctype)
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// TestTokenAdversaryTable: what a client and a hostile upstream tried
// against a budget reserving max_tokens and settling to
// usage.total_tokens, and what each counts (through the binary). Every
// row holds; the rows that once did not have their own tests
// (TestTokenGzipDodge, TestTokenUpgrade).
func TestTokenAdversaryTable(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "tokens_adv.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": scriptedLLM(t)}})
	c := newClient(t, "")
	const est = `{"model":"m","max_tokens":50}`
	for i, tc := range []struct {
		name    string
		method  string
		body    string
		hdr     map[string]string
		chunked bool
		status  int
		want    int64
	}{
		// The client's side.
		{name: "plain", body: est, hdr: map[string]string{"X-Case": "json"}, status: 200, want: 9},
		{name: "a BOM before the JSON", body: "\ufeff" + est, hdr: map[string]string{"X-Case": "json"}, status: 400},
		{name: "a comment in the JSON", body: "// x\n" + est, hdr: map[string]string{"X-Case": "json"}, status: 400},
		{name: "a JSON body sent as text/plain: read all the same", body: est, hdr: map[string]string{"X-Case": "json", "Content-Type": "text/plain"}, status: 200, want: 9},
		{name: "a form body", body: "max_tokens=50", hdr: map[string]string{"X-Case": "json", "Content-Type": "application/x-www-form-urlencoded"}, status: 400},
		{name: "chunked", body: est, chunked: true, hdr: map[string]string{"X-Case": "json"}, status: 200, want: 9},
		{name: "Expect: 100-continue", body: est, hdr: map[string]string{"X-Case": "json", "Expect": "100-continue"}, status: 200, want: 9},
		{name: "spaces around the key", body: `{ "max_tokens" : 50 }` + "\n", hdr: map[string]string{"X-Case": "sse -1"}, status: 200, want: 50},
		{name: "HEAD: the cost reserved, no usage", method: "HEAD", hdr: map[string]string{"X-Case": "json"}, status: 200, want: 1},
		// The upstream's side.
		{name: "usage after [DONE]", body: est, hdr: map[string]string{"X-Case": "after done"}, status: 200, want: 9},
		{name: "CRLF, data: without a space", body: est, hdr: map[string]string{"X-Case": "crlf no space"}, status: 200, want: 9},
		{name: "multi-line data with a comment", body: est, hdr: map[string]string{"X-Case": "multi-line"}, status: 200, want: 9},
		{name: "usage 2^63 in a stream", body: est, hdr: map[string]string{"X-Case": "sse 2^63"}, status: 200, want: 50},
		{name: "usage 1e400", body: est, hdr: map[string]string{"X-Case": "sse 1e400"}, status: 200, want: 50},
		{name: "usage -1", body: est, hdr: map[string]string{"X-Case": "sse -1"}, status: 200, want: 50},
		{name: "usage a string", body: est, hdr: map[string]string{"X-Case": "json string"}, status: 200, want: 50},
		{name: "usage 2^63-1", body: est, hdr: map[string]string{"X-Case": "json 2^63"}, status: 200, want: 50},
		{name: "the path repeated, one nested elsewhere", body: est, hdr: map[string]string{"X-Case": "path repeated"}, status: 200, want: 9},
		{name: "a 204", body: est, hdr: map[string]string{"X-Case": "204"}, status: 204, want: 50},
		{name: "a 304", body: est, hdr: map[string]string{"X-Case": "304"}, status: 304, want: 50},
		{name: "a 504 with usage: zero", body: est, hdr: map[string]string{"X-Case": "504"}, status: 504, want: 0},
		{name: "the upstream resets: 502, zero", body: est, hdr: map[string]string{"X-Case": "reset"}, status: 502, want: 0},
		{name: "the usage event never ended", body: est, hdr: map[string]string{"X-Case": "sse not finished"}, status: 200, want: 50},
	} {
		key := fmt.Sprintf("adv-%d", i)
		method := tc.method
		if method == "" {
			method = "POST"
		}
		var body io.Reader = strings.NewReader(tc.body)
		if tc.chunked {
			body = io.MultiReader(strings.NewReader(tc.body)) // no length: chunked
		}
		req, err := http.NewRequest(method, g.url("/realtime/chat"), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
			continue
		}
		if tc.status == 400 {
			// Nothing reserved: the key was never counted.
			if u, _ := used(t, g, "tokens", key); u != 0 {
				t.Errorf("%s: %d units counted for a refused request", tc.name, u)
			}
			continue
		}
		waitTokens(t, g, "tokens", key, tc.want)
	}
}
