package proxy_test

import (
	"bufio"
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
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// echoUpgradeUpstream answers every request that asks for an upgrade (and
// every request to /rogue, asked or not) with 101 and then echoes each
// line on the tunnel as "echo <line>"; other requests get "plain".
// upgrades counts the requests that reached it with an Upgrade header.
func echoUpgradeUpstream(t *testing.T, upgrades *atomic.Int64) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		asked := r.Header.Get("Upgrade") != ""
		if asked {
			upgrades.Add(1)
		}
		if !asked && !strings.HasSuffix(r.URL.Path, "/rogue") {
			fmt.Fprint(w, "plain")
			return
		}
		testupstream.EchoTunnel(w)
	})
}

// TestUpgradeHostile: what a client could send to turn one counted
// request into an unlimited tunnel. A route forwards an Upgrade only when
// it lists every protocol named (upgrades = ["websocket"]); otherwise the
// upstream sees no Upgrade and answers an ordinary request, and an
// upstream that switches protocols anyway gets the client a 502, never a
// tunnel. Each row is sent on a raw connection and checked for the
// status, what the upstream saw and whether bytes pass after it.
func TestUpgradeHostile(t *testing.T) {
	var upgrades atomic.Int64
	up := echoUpgradeUpstream(t, &upgrades)
	p := compile(t, func(c *config.Config) {
		l := limit("one", "fixed_window", "1000/1h")
		l.By = []string{"ip"}
		c.Limits = []config.LimitConfig{l}
		ws := route("ws", "/ws", up.URL, "one")
		ws.Upgrades = []string{"websocket"}
		c.Routes = []config.RouteConfig{route("plain", "/plain", up.URL, "one"), ws}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	addr := strings.TrimPrefix(gw.URL, "http://")
	for _, tc := range []struct {
		name, path, headers string
		status              int  // the gateway's answer
		upstreamUpgrade     bool // the upstream saw an Upgrade header
	}{
		{"websocket on a route without upgrades", "/plain/x", "Connection: Upgrade\r\nUpgrade: websocket\r\n", 200, false},
		{"WebSocket spelled otherwise", "/plain/x", "Connection: upgrade\r\nUpgrade: WebSocket\r\n", 200, false},
		{"Connection: keep-alive, Upgrade", "/plain/x", "Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n", 200, false},
		{"two Upgrade lines", "/plain/x", "Connection: Upgrade\r\nUpgrade: websocket\r\nUpgrade: websocket\r\n", 200, false},
		{"h2c on a websocket route", "/ws/x", "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n", 200, false},
		{"a protocol not listed beside websocket", "/ws/x", "Connection: Upgrade\r\nUpgrade: foo, websocket\r\n", 200, false},
		{"websocket then a protocol not listed", "/ws/x", "Connection: Upgrade\r\nUpgrade: websocket, foo\r\n", 200, false},
		{"upstream switches though nothing was asked", "/plain/rogue", "", 502, false},
		{"upstream switches after a refused upgrade", "/plain/rogue", "Connection: Upgrade\r\nUpgrade: websocket\r\n", 502, false},
		{"websocket on a route that lists it", "/ws/x", "Connection: Upgrade\r\nUpgrade: websocket\r\n", 101, true},
		{"WebSocket, keep-alive, on a route that lists it", "/ws/x", "Connection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n", 101, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := upgrades.Load()
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", tc.path, addr, tc.headers)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.status)
			}
			if got := upgrades.Load() > before; got != tc.upstreamUpgrade {
				t.Errorf("the upstream saw an Upgrade: %v, want %v", got, tc.upstreamUpgrade)
			}
			if tc.status != http.StatusSwitchingProtocols {
				b, _ := io.ReadAll(resp.Body)
				if tc.status == 200 && string(b) != "plain" {
					t.Errorf("body %q, want the upstream's ordinary answer", b)
				}
				return
			}
			// The tunnel carries bytes both ways.
			fmt.Fprint(conn, "hello\n")
			if line, err := br.ReadString('\n'); err != nil || line != "echo hello\n" {
				t.Errorf("through the tunnel: %q, %v", line, err)
			}
		})
	}
}

// TestExtendedConnectRefused: an HTTP/2 extended CONNECT (RFC 8441,
// WebSocket over HTTP/2: method CONNECT with a :protocol pseudo-header)
// that reaches the handler (Go's server refuses it unless GODEBUG
// http2xconnect=1) is refused like any CONNECT: 405, nothing forwarded.
func TestExtendedConnectRefused(t *testing.T) {
	var upgrades atomic.Int64
	up := echoUpgradeUpstream(t, &upgrades)
	p := compile(t, func(c *config.Config) {
		ws := route("ws", "/", up.URL)
		ws.Upgrades = []string{"websocket"}
		c.Routes = []config.RouteConfig{ws}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodConnect, "https://gw.example/chat", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.Header.Set(":protocol", "websocket")
	r.Header.Set("Sec-Websocket-Version", "13")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || up.hits.Load() != 0 {
		t.Errorf("extended CONNECT: %d, %d upstream requests; want 405 and none", w.Code, up.hits.Load())
	}
}
