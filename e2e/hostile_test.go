package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func startHostile(t *testing.T) (*gw, *upstream) {
	t.Helper()
	up := newUpstream(t)
	g := startGateway(t, "hostile.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL, "Down": closedAddr(t)}})
	return g, up
}

// rawResponse is one response read off a raw connection.
type rawResponse struct {
	StatusCode int
	Header     http.Header
	Body       string
}

// readResponses reads pipelined responses from conn until it is closed,
// fails, or its deadline passes.
func readResponses(conn net.Conn) []rawResponse {
	br := bufio.NewReader(conn)
	var out []rawResponse
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, rawResponse{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(b)})
	}
}

// TestSmuggling: request-smuggling shapes sent over raw
// sockets are rejected (400, or 501 for an unknown transfer coding) or
// re-framed; the upstream never receives raw bytes of another request, and
// every request the upstream receives is one the client got an answer to.
func TestSmuggling(t *testing.T) {
	t.Parallel()
	g, up := startHostile(t)
	const smuggled = "GET /echo/%s-smuggled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	for _, tc := range []struct {
		name string
		req  string
		// reject lists the statuses that count as a rejection; reframe
		// allows a normalised (re-framed) forwarding instead.
		reject  []int
		reframe bool
		// inBody marks framing errors inside the body: the headers may
		// already have been forwarded when the error is found, so the
		// upstream may see the request, but only with an aborted body.
		inBody bool
	}{
		{"cl-te", "POST /echo/cl-te HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "cl-te"), []int{400}, true, false},
		{"te-cl", "POST /echo/te-cl HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "te-cl"), []int{400}, true, false},
		{"dup-cl", "POST /echo/dup-cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nhello" +
			strings.ReplaceAll(smuggled, "%s", "dup-cl"), []int{400}, false, false},
		{"plus-cl", "POST /echo/plus-cl HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello" +
			strings.ReplaceAll(smuggled, "%s", "plus-cl"), []int{400}, false, false},
		{"bad-chunk-size", "POST /echo/bad-chunk-size HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "bad-chunk-size"), []int{400}, false, true},
		{"bare-lf-chunk", "POST /echo/bare-lf-chunk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "bare-lf-chunk"), []int{400}, false, true},
		{"huge-chunk-size", "POST /echo/huge-chunk-size HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\nhello\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "huge-chunk-size"), []int{400}, false, true},
		{"te-unknown", "POST /echo/te-unknown HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "te-unknown"), []int{400, 501}, false, false},
		{"te-duplicated", "POST /echo/te-duplicated HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n" +
			strings.ReplaceAll(smuggled, "%s", "te-duplicated"), []int{400, 501}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.DialTimeout("tcp", g.Listen, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			resps := readResponses(conn)
			if len(resps) == 0 {
				t.Fatalf("no response at all to %q (a rejection must still answer)", tc.req)
			}
			prefix := "/echo/" + tc.name
			var got []seen
			for _, s := range up.all() {
				if strings.HasPrefix(s.Path, prefix) {
					got = append(got, s)
				}
			}
			first := resps[0].StatusCode
			rejected := false
			for _, s := range tc.reject {
				rejected = rejected || first == s
			}
			switch {
			case rejected:
				// A rejection of the headers happens before the handler:
				// nothing reaches the upstream; the connection is not reused.
				for _, s := range got {
					if !tc.inBody || s.BodyErr == "" {
						t.Errorf("rejected with %d, but the upstream received a whole request: %+v", first, s)
					}
				}
				if len(resps) > 1 {
					t.Errorf("after rejecting with %d the gateway went on to answer %d more pipelined request(s)", first, len(resps)-1)
				}
			case tc.reframe && first == 200:
				// Re-framed: chunked wins, the body is the chunked body,
				// and what follows is a request of its own.
				echoes := 0
				for _, r := range resps {
					if r.Header.Get("X-Upstream") == "echo" {
						echoes++
					}
				}
				if echoes != len(got) {
					t.Errorf("the client got %d upstream answers, the upstream saw %d requests: desynchronised", echoes, len(got))
				}
				if len(got) > 0 && len(got[0].TransferEncoding) > 0 && got[0].Header.Get("Content-Length") != "" {
					t.Errorf("upstream got both Transfer-Encoding and Content-Length: %+v", got[0])
				}
			default:
				t.Errorf("first response %d, want one of %v (rejected)%s; upstream saw %+v",
					first, tc.reject, map[bool]string{true: " or 200 (re-framed)"}[tc.reframe], got)
			}
			for _, s := range got {
				if strings.Contains(s.Body, "HTTP/1.1") || strings.Contains(s.Body, "zz") || strings.Contains(s.Body, "0\r\n") {
					t.Errorf("raw framing bytes reached the upstream in a body: %q", s.Body)
				}
			}
		})
	}
}

// TestSlowloris: connections dripping header bytes are
// closed at read_header_timeout (1s) while a normal client is served.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	g, _ := startHostile(t)
	const conns = 20
	start := time.Now()
	closed := make(chan time.Duration, conns)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < conns; i++ {
		conn, err := net.DialTimeout("tcp", g.Listen, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		wg.Add(2)
		go func() { // drip
			defer wg.Done()
			if _, err := conn.Write([]byte("GET /echo HTTP/1.1\r\nHost: x\r\nX-Drip: ")); err != nil {
				return
			}
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte("a")); err != nil {
						return
					}
				}
			}
		}()
		go func() { // notice when the server ends the connection
			defer wg.Done()
			defer conn.Close()
			buf := make([]byte, 512)
			for {
				_, err := conn.Read(buf)
				if err != nil {
					if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
						closed <- -1
					} else {
						closed <- time.Since(start)
					}
					return
				}
			}
		}()
	}
	// A normal client is served throughout.
	c := newClient(t, "")
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url("/echo/normal"), nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("normal request %d during the slowloris: %v", i+1, err)
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("normal request %d during the slowloris: status %d", i+1, resp.StatusCode)
			}
		}
		cancel()
		time.Sleep(200 * time.Millisecond)
	}
	for i := 0; i < conns; i++ {
		d := <-closed
		if d < 0 {
			t.Fatalf("a connection dripping headers for 15s was never closed (read_header_timeout = 1s)")
		}
		if d > 8*time.Second {
			t.Errorf("a dripping connection was closed only after %v (read_header_timeout = 1s)", d)
		}
	}
}

// TestClientDisconnectReleasesSlot: with max_in_flight
// = 1, a client that disconnects mid-request, an upstream timeout and an
// unreachable upstream all give the slot back; the disconnected request's
// upstream call is cancelled.
func TestClientDisconnectReleasesSlot(t *testing.T) {
	t.Parallel()
	g, up := startHostile(t)
	c := newClient(t, "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url("/one/slow"), nil)
		req.Header.Set(hSleep, "20s")
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			err = errors.New("the slow request completed: " + resp.Status)
		}
		errc <- err
	}()
	s := up.waitArrived(t, 10*time.Second)
	if s.Path != "/one/slow" {
		t.Fatalf("unexpected upstream request %s", s.Path)
	}
	r := get(t, c, g.url("/one/second"), nil)
	check429Body(t, r, "one")
	if ra, ok := r.retryAfter(t); !ok || ra < 1 {
		t.Errorf("concurrency 429 Retry-After %q, want ≥ 1", r.Header.Get("Retry-After"))
	}

	cancel() // the client goes away mid-request
	<-errc
	select {
	case f := <-up.finished:
		if !f.Cancelled {
			t.Errorf("the upstream request of a disconnected client ran to the end")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the upstream request was not cancelled within 5s of the client disconnecting")
	}
	pollStatus(t, c, g.url("/one/after-disconnect"), nil, 200, 5*time.Second)

	// Upstream timeout (504) and unreachable upstream (502) release too.
	for i := 0; i < 2; i++ {
		get(t, c, g.url("/one-fast"), map[string]string{hSleep: "10s"}).problem(t, http.StatusGatewayTimeout)
	}
	pollStatus(t, c, g.url("/one-fast/after"), nil, 200, 5*time.Second)
	for i := 0; i < 3; i++ {
		get(t, c, g.url("/one-down"), nil).problem(t, http.StatusBadGateway)
	}
}

// pollStatus repeats a GET until it answers want or the deadline passes.
func pollStatus(t testing.TB, c *http.Client, url string, hdr map[string]string, want int, d time.Duration) *response {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := get(t, c, url, hdr)
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still %s after %v, want %d", url, r, d, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExpectContinueNoPoisoning: when the upstream answers
// a request with `Expect: 100-continue` without reading its body, the body
// (here shaped like another request) never reaches the upstream as a
// request of its own, and the next requests are served normally.
func TestExpectContinueNoPoisoning(t *testing.T) {
	t.Parallel()
	g, up := startHostile(t)
	tr := &http.Transport{ExpectContinueTimeout: time.Second, MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	poison := "GET /echo/poisoned HTTP/1.1\r\nHost: x\r\n\r\n"
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", g.url("/echo/upload"), strings.NewReader(strings.Repeat(poison, 100)))
		req.Header.Set("Expect", "100-continue")
		req.Header.Set(hNoRead, "1")
		req.Header.Set(hStatus, "413")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("round %d: upload: %v", i+1, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("round %d: upload answered %d, want the upstream's 413", i+1, resp.StatusCode)
		}
		r := get(t, newClient(t, ""), g.url(fmt.Sprintf("/echo/next-%d", i)), nil)
		if r.Status != 200 || r.echo(t).Path != fmt.Sprintf("/echo/next-%d", i) {
			t.Errorf("round %d: the request after the upload: %s", i+1, r)
		}
	}
	for _, s := range up.all() {
		if s.Path == "/echo/poisoned" {
			t.Fatalf("the upstream received the body of an upload as a request: %+v", s)
		}
	}
}

// TestQueryFlood: 10,000 query parameters are answered
// (forwarded, or refused as too large) without harm, and parameters Go
// cannot parse unambiguously (a ';' separator) are not smuggled upstream.
func TestQueryFlood(t *testing.T) {
	t.Parallel()
	g, _ := startHostile(t)
	c := newClient(t, "")
	var q strings.Builder
	for i := 0; i < 10000; i++ {
		if i > 0 {
			q.WriteByte('&')
		}
		fmt.Fprintf(&q, "p%d=%d", i, i)
	}
	r := get(t, c, g.url("/echo/flood?"+q.String()), nil)
	switch r.Status {
	case 200:
		if s := r.echo(t); s.RawQuery != q.String() {
			t.Errorf("10,000 parameters arrived changed: %d bytes, want %d", len(s.RawQuery), q.Len())
		}
	case 400, 414, 431:
	default:
		t.Errorf("10,000 query parameters: %s", r)
	}
	r = get(t, c, g.url("/echo/semi?a=1;admin=true&b=2"), nil)
	if r.Status != 200 {
		t.Fatalf("query with ';': %s", r)
	}
	if s := r.echo(t); strings.Contains(s.RawQuery, ";") || strings.Contains(s.RawQuery, "admin") {
		t.Errorf("the upstream received the unparsable parameter: %q", s.RawQuery)
	}
}
