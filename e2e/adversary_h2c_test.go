package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The lax upstream and the raw client need x/net/http2's connection-level
// API (ServeConn on a hijacked connection, a ClientConn over a conn we
// dialed), which net/http does not expose.
//
//lint:file-ignore SA1019 connection-level HTTP/2 API, see above.

// laxH2CUpstream starts an upstream that, like some HTTP/2 servers,
// accepts an "Upgrade: h2c" request without checking HTTP2-Settings: it
// answers 101 and serves HTTP/2 on the connection. streams counts the
// HTTP/2 requests it served.
func laxH2CUpstream(t *testing.T, streams *atomic.Int64) *httptest.Server {
	h2 := &http2.Server{}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streams.Add(1)
		fmt.Fprint(w, "smuggled "+r.URL.Path)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(strings.ToLower(r.Header.Get("Upgrade")), "h2c") {
			fmt.Fprint(w, "plain "+r.URL.Path)
			return
		}
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
		rw.Flush()
		h2.ServeConn(conn, &http2.ServeConnOpts{Handler: inner})
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// bufConn reads through the reader that read the 101 response.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestH2CUpgradeNotForwarded: h2c smuggling. A client asking the gateway
// for "Upgrade: h2c" must not get a tunnel to the upstream: HTTP/2 over
// it would reach the upstream unlimited and unrouted (every stream
// bypasses the gateway). The gateway forwards such a request without the
// upgrade, as one ordinary, counted request (curl --http2 on http://
// asks for it and gets HTTP/1.1).
func TestH2CUpgradeNotForwarded(t *testing.T) {
	t.Parallel()
	var streams atomic.Int64
	lax := laxH2CUpstream(t, &streams)
	up := newUpstream(t)
	extra := fmt.Sprintf(`
[[limits]]
name = "adv-h2c"
by = ["ip"]
rates = ["2/minute"]

[[routes]]
name = "lax"
path_prefix = "/lax"
upstream = %q
limits = ["adv-h2c"]
`, lax.URL)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", extra)})

	conn, err := net.DialTimeout("tcp", g.Listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /lax/x HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", g.Listen)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer to the upgrade: %v", err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		tr := &http2.Transport{AllowHTTP: true, DialTLS: func(string, string, *tls.Config) (net.Conn, error) { return nil, fmt.Errorf("unused") }}
		cc, err := tr.NewClientConn(bufConn{conn, br})
		if err != nil {
			t.Fatalf("the gateway switched to h2c (101) and HTTP/2 on the tunnel failed: %v", err)
		}
		for i := range 10 {
			req, _ := http.NewRequest("GET", "http://"+g.Listen+fmt.Sprintf("/anything/%d", i), nil)
			if r, err := cc.RoundTrip(req); err == nil {
				r.Body.Close()
			}
		}
		t.Fatalf("the gateway tunnelled an h2c upgrade: the upstream served %d HTTP/2 requests past a 2/minute limit and outside any route", streams.Load())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || streams.Load() != 0 {
		t.Errorf("h2c upgrade request: %d, %d smuggled streams; want 200 as a plain request and none", resp.StatusCode, streams.Load())
	}
	// The request counted: two under the limit, then 429.
	c := newClient(t, "")
	get(t, c, g.url("/lax/y"), nil)
	get(t, c, g.url("/lax/z"), nil).problem(t, 429)
}
