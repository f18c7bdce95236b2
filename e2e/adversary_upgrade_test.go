package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/testupstream"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// echoTunnelUpstream answers a request that asks for an upgrade with 101
// and then echoes each line on the connection as "echo <line>"; any other
// request gets 426 (Upgrade Required), as a WebSocket endpoint does.
// requests and upgrades count what reached it.
func echoTunnelUpstream(t *testing.T, requests, upgrades *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		upgrades.Add(1)
		testupstream.EchoTunnel(w)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// TestUpgradeOnlyWhereListed: an upgrade the upstream accepts turns one
// counted request into a tunnel no limit sees again, so a route forwards
// an Upgrade only for the protocols it lists (routes[].upgrades). Through
// the binary, against an upstream that answers 101 and then echoes: on a
// route without upgrades the upstream sees no Upgrade and the client gets
// its ordinary answer (426), no tunnel; on a route with upgrades =
// ["websocket"] the tunnel opens and carries bytes, holding its
// concurrency slot until it closes. Over HTTP/2 (h2c) an Upgrade header
// (400) and an extended CONNECT (RFC 8441; stream reset) are refused by
// the server and reach no upstream. Before upgrades existed, every Upgrade
// but h2c was forwarded and the first route tunnelled too.
func TestUpgradeOnlyWhereListed(t *testing.T) {
	t.Parallel()
	var requests, upgrades atomic.Int64
	up := echoTunnelUpstream(t, &requests, &upgrades)
	body := fmt.Sprintf(`
[[limits]]
name = "one-tunnel"
algorithm = "concurrency"
max_in_flight = 1
by = ["ip"]

[[routes]]
name = "closed"
path_prefix = "/closed"
upstream = %[1]q

[[routes]]
name = "open"
path_prefix = "/open"
upstream = %[1]q
upgrades = ["websocket"]
limits = ["one-tunnel"]
`, up.URL)
	pr := protocol{name: "h2c", proto: "HTTP/2.0", h2c: true}
	data, _, _, _ := frontData(t, pr, t.TempDir(), "", "", body)
	g := startGateway(t, "front.toml.tmpl", gwOpts{Data: data})

	upgrade := func(path, hdr string) (net.Conn, *bufio.Reader, *http.Response) {
		t.Helper()
		conn := rawConn(t, g.Listen)
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%sSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, g.Listen, hdr)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", path, err)
		}
		return conn, br, resp
	}
	for _, hdr := range []string{
		"Connection: Upgrade\r\nUpgrade: websocket\r\n",
		"Connection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n",
	} {
		conn, _, resp := upgrade("/closed/chat", hdr)
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		conn.Close()
		if resp.StatusCode != http.StatusUpgradeRequired {
			t.Errorf("%q on a route without upgrades: %d %q; want the upstream's ordinary 426, no tunnel", hdr, resp.StatusCode, b)
		}
	}
	if n := upgrades.Load(); n != 0 {
		t.Fatalf("the upstream saw %d Upgrade requests through a route without upgrades", n)
	}
	conn, br, resp := upgrade("/open/chat", "Connection: Upgrade\r\nUpgrade: websocket\r\n")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("websocket on a route that lists it: %d %q, want 101", resp.StatusCode, b)
	}
	for i := range 3 {
		msg := fmt.Sprintf("hello %d\n", i)
		fmt.Fprint(conn, msg)
		if got, err := br.ReadString('\n'); err != nil || got != "echo "+msg {
			t.Fatalf("through the tunnel: %q, %v; want %q", got, err, "echo "+msg)
		}
	}
	// The open tunnel holds the client's one concurrency slot.
	c := newClient(t, "")
	get(t, c, g.url("/open/x"), nil).problem(t, 429)
	conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	for get(t, c, g.url("/open/x"), nil).Status == 429 {
		if time.Now().After(deadline) {
			t.Fatal("the slot was not given back within 30s of the tunnel closing")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// HTTP/2: a request with a connection-specific header (Upgrade,
	// Connection) is answered 400 by Go's server before the gateway's
	// handler runs, and one with :protocol (extended CONNECT, off unless
	// GODEBUG=http2xconnect=1; the handler refuses every CONNECT with 405
	// anyway) is reset.
	before := requests.Load()
	h2 := dialRawH2(t, g.Listen, 0, true)
	h2.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(g.Listen, "/open/chat", "upgrade", "websocket", "connection", "upgrade")})
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "CONNECT"}, {":protocol", "websocket"}, {":scheme", "http"}, {":authority", g.Listen}, {":path", "/open/chat"}, {"sec-websocket-version", "13"}} {
		e.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	h2.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, BlockFragment: b.Bytes()})
	// A plain request after them shows the connection still serves.
	h2.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(g.Listen, "/closed/plain")})
	deadline = time.Now().Add(30 * time.Second)
	for {
		h2.mu.Lock()
		rsts, responses := h2.rsts, h2.responses
		h2.mu.Unlock()
		if rsts+responses >= 3 {
			if rsts != 1 || responses != 2 {
				t.Errorf("HTTP/2: %d streams reset, %d answered; want the extended CONNECT reset, the Upgrade (Go's 400) and the plain request answered", rsts, responses)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HTTP/2: %d resets and %d answers after 30s, want 3 in all", rsts, responses)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := requests.Load() - before; n != 1 || upgrades.Load() != 1 {
		t.Errorf("HTTP/2: %d requests reached the upstream (want the plain one), %d upgrades in all (want the one tunnel)", n, upgrades.Load())
	}
	if strings.Contains(g.output(), "panic") {
		t.Errorf("gateway output has a panic:\n%s", g.output())
	}
}
