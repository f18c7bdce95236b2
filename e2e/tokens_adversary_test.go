package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
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
	var requests, upgrades atomic.Int64
	up := echoTunnelUpstream(t, &requests, &upgrades)
	g := startGateway(t, "tokens_upgrade.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL}})
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
	c := newClient(t, "")
	var wg sync.WaitGroup
	var ok, denied atomic.Int64
	for range 50 {
		wg.Go(func() {
			r := chat(t, c, g.url("/v1/chat"), 100, map[string]string{"X-API-Key": "cl", "X-Usage": "37", "X-Hold": "1"})
			switch r.Status {
			case 200:
				ok.Add(1)
			case 429:
				denied.Add(1)
			default:
				t.Errorf("a reservation: %s", r)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for denied.Load()+u.arrived.Load() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("%d denied, %d at the upstream: some requests never got an answer", denied.Load(), u.arrived.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := u.arrived.Load(); n > 10 {
		t.Fatalf("%d requests reserved 100 of 1000 tokens each", n)
	}
	u.free()
	wg.Wait()
	n := ok.Load()
	if n != u.arrived.Load() || n+denied.Load() != 50 {
		t.Fatalf("%d admitted, %d denied, %d at the upstream", n, denied.Load(), u.arrived.Load())
	}
	waitTokens(t, g, "tokens", "cl", 37*n)
	if _, rem := used(t, g, "tokens", "cl"); rem != 1000-37*n {
		t.Errorf("remaining %d, want %d", rem, 1000-37*n)
	}
	t.Logf("%d admitted at once", n)
}
