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

	"github.com/tollgate/gateway/internal/testupstream"
)

// streamTimeout is the stream route's timeout: the budget for the
// upstream's response headers, not for the whole exchange.
const streamTimeout = time.Second

// newStreamUpstream starts an upstream that streams: /slow-body sends its
// headers at once and its body over 3 timeouts, /slow-headers sends
// nothing for 3 timeouts, /sse sends an event every 300 ms for 3 timeouts,
// /upload reads the whole request body before it answers, /ws accepts a
// WebSocket upgrade and echoes every line on the tunnel.
func newStreamUpstream(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/stream/slow-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		for i := 0; i < 6; i++ {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(streamTimeout / 2):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "end\n")
	})
	mux.HandleFunc("/stream/slow-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * streamTimeout):
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "too late")
	})
	mux.HandleFunc("/stream/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := 0; i < 10; i++ {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "id: %d\ndata: tick %d\n\n", i, i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/stream/upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "read %d bytes", n)
	})
	mux.HandleFunc("/stream/ws", func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		testupstream.EchoTunnel(w)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// startStreamGateway starts a gateway whose route "stream" proxies to a
// stream upstream with timeout = streamTimeout.
func startStreamGateway(t *testing.T) *gw {
	t.Helper()
	up := newUpstream(t)
	su := newStreamUpstream(t)
	extra := fmt.Sprintf(`
[[routes]]
name = "stream"
path_prefix = "/stream"
upstream = %q
timeout = %q
upgrades = ["websocket"]
`, su.URL, streamTimeout.String())
	return startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", extra)})
}

// TestRouteTimeoutBoundsHeadersOnly: a route's timeout is the budget for
// the upstream's response headers. A body that takes longer arrives whole
// (it used to be cut at the timeout, the client seeing an empty or
// truncated 200); headers later than the timeout give 504.
func TestRouteTimeoutBoundsHeadersOnly(t *testing.T) {
	t.Parallel()
	g := startStreamGateway(t)
	c := newClient(t, "")

	r := get(t, c, g.url("/stream/slow-body"), nil)
	want := "part 0\npart 1\npart 2\npart 3\npart 4\npart 5\nend\n"
	if r.Status != 200 || string(r.Body) != want {
		t.Errorf("slow body: %s\nwant 200 with the whole body %q", r, want)
	}

	p := get(t, c, g.url("/stream/slow-headers"), nil).problem(t, 504)
	if !strings.Contains(p.Detail, "in time") {
		t.Errorf("504 detail %q", p.Detail)
	}
}

// TestRouteTimeoutSSE: a server-sent event stream runs past the route's
// timeout until the upstream ends it, every event arriving.
func TestRouteTimeoutSSE(t *testing.T) {
	t.Parallel()
	g := startStreamGateway(t)
	c := newClient(t, "")
	req, _ := http.NewRequest("GET", g.url("/stream/sse"), nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE: status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	if err := sc.Err(); err != nil || len(events) != 10 || events[9] != "tick 9" {
		t.Errorf("SSE: %d events %q, error %v; want tick 0..9 and a clean end", len(events), events, err)
	}
}

// TestRouteTimeoutWebSocket: an upgraded connection stays open past the
// route's timeout and carries data both ways.
func TestRouteTimeoutWebSocket(t *testing.T) {
	t.Parallel()
	g := startStreamGateway(t)
	conn := rawConn(t, g.Listen)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET /stream/ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", g.Listen)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade: status %d: %s", resp.StatusCode, b)
	}
	for i, wait := range []time.Duration{0, streamTimeout + streamTimeout/2, streamTimeout / 2} {
		time.Sleep(wait)
		msg := fmt.Sprintf("hello %d\n", i)
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatalf("write %d (after %v): %v", i, wait, err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != "echo "+msg {
			t.Fatalf("echo %d (after %v): %q, %v; want %q", i, wait, got, err, "echo "+msg)
		}
	}
}

// TestRouteIdleTimeout: with routes[].idle_timeout set, a response body
// whose upstream falls silent longer than that is cut off (the client sees
// a truncated body, never a complete-looking one), while a stream that
// keeps sending within it is not.
func TestRouteIdleTimeout(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	su := newStreamUpstream(t)
	extra := fmt.Sprintf(`
[[routes]]
name = "idle"
path_prefix = "/idle"
strip_prefix = true
upstream = %q
timeout = "5s"
idle_timeout = "200ms"

[[routes]]
name = "lively"
path_prefix = "/lively"
strip_prefix = true
upstream = %q
timeout = "5s"
idle_timeout = "2s"
`, su.URL, su.URL)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", extra)})
	c := newClient(t, "")

	// slow-body pauses half a second between parts: past 200 ms.
	_, err := tryDo(c, "GET", g.url("/idle/stream/slow-body"), nil, nil)
	if err == nil {
		t.Errorf("a body silent past idle_timeout arrived as if complete")
	}
	r := get(t, c, g.url("/lively/stream/slow-body"), nil)
	if want := "part 0\npart 1\npart 2\npart 3\npart 4\npart 5\nend\n"; r.Status != 200 || string(r.Body) != want {
		t.Errorf("a body within idle_timeout: %s, want the whole body", r)
	}
}

// TestRouteTimeoutSlowUpload: a client that trickles its request body
// cannot hold an exchange past the route's timeout (the budget covers
// sending the request and receiving the response headers): it is answered
// 408 and its connection closed. Before, the gateway waited on the body
// for as long as the client kept sending, whatever the timeout.
func TestRouteTimeoutSlowUpload(t *testing.T) {
	t.Parallel()
	g := startStreamGateway(t)
	conn := rawConn(t, g.Listen)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST /stream/upload HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n", g.Listen)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := io.WriteString(conn, "1\r\nx\r\n"); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled upload: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive") {
		t.Fatalf("trickled upload: %d %s, want 408", resp.StatusCode, b)
	}
	if !resp.Close {
		t.Errorf("the connection of an unread body is kept open")
	}
}
