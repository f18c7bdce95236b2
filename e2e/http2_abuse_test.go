package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// abuseStreams is the gateway's http2_max_concurrent_streams in these
// tests.
const abuseStreams = 20

// slowUpstream holds each request 100 ms (less when the gateway cancels
// it) and records the most it ever held at once.
type slowUpstream struct {
	*httptest.Server
	inflight, peak, total atomic.Int64
}

func newSlowUpstream(t testing.TB) *slowUpstream {
	u := &slowUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := u.inflight.Add(1)
		defer u.inflight.Add(-1)
		u.total.Add(1)
		for {
			p := u.peak.Load()
			if n <= p || u.peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.Write([]byte("slow"))
	}))
	t.Cleanup(u.Close)
	return u
}

// rawH2 is an HTTP/2 client connection driven frame by frame.
type rawH2 struct {
	conn net.Conn
	w    *http2.Framer
	// Filled by the reader goroutine until the connection ends.
	mu        sync.Mutex
	goAway    *http2.GoAwayFrame
	rsts      int
	responses int
	done      chan struct{}
	readErr   error
}

// dialRawH2 opens a cleartext HTTP/2 connection with prior knowledge and
// a reader that tallies what the server sends. rcvBuf > 0 shrinks the
// socket's receive buffer, so a peer that does not read backs up fast.
func dialRawH2(t testing.TB, addr string, rcvBuf int, read bool) *rawH2 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rcvBuf > 0 {
		conn.(*net.TCPConn).SetReadBuffer(rcvBuf)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &rawH2{conn: conn, w: http2.NewFramer(conn, nil), done: make(chan struct{})}
	if err := c.w.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if !read {
		return c
	}
	go func() {
		defer close(c.done)
		r := http2.NewFramer(nil, conn)
		for {
			f, err := r.ReadFrame()
			if err != nil {
				c.mu.Lock()
				c.readErr = err
				c.mu.Unlock()
				return
			}
			c.mu.Lock()
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				c.goAway = f
			case *http2.RSTStreamFrame:
				c.rsts++
			case *http2.HeadersFrame:
				c.responses++
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// h2Headers encodes a GET of path with extra header fields (name, value).
func h2Headers(host, path string, extra ...string) []byte {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	e.WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
	e.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
	e.WriteField(hpack.HeaderField{Name: ":authority", Value: host})
	e.WriteField(hpack.HeaderField{Name: ":path", Value: path})
	for i := 0; i+1 < len(extra); i += 2 {
		e.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return b.Bytes()
}

// closed reports whether the server ended the connection within d, and
// the GOAWAY code it sent (if any).
func (c *rawH2) closed(d time.Duration) (bool, string) {
	select {
	case <-c.done:
	case <-time.After(d):
		return false, ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goAway != nil {
		return true, c.goAway.ErrCode.String()
	}
	return true, fmt.Sprint(c.readErr)
}

// bystander sends a request every 20 ms on its own HTTP/2 connection
// until stop, and reports the requests and failures.
func bystander(t testing.TB, url string) (stop func() (ok, failed int, firstErr error)) {
	c := protoClient(t, protocols[1], nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var ok, failed int
	var first error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := c.Do(req)
			if ctx.Err() != nil {
				return
			}
			if err == nil && resp.StatusCode != 200 {
				err = errors.New(resp.Status)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if err != nil {
				failed++
				if first == nil {
					first = err
				}
			} else {
				ok++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() (int, int, error) {
		cancel()
		<-done
		return ok, failed, first
	}
}

// flood writes frames with write until the gateway cuts the connection
// or stops reading from it (a write that makes no progress for 2 s: the
// frames back up in the attacker's own socket, not in the gateway), and
// fails if 1,000,000 frames go through without either. The bound is far
// above what the kernel absorbs: a SETTINGS flood's acknowledgements
// (9 bytes each) first fill the gateway's socket send buffer (up to
// 4 MiB, about 466,000 of them) before anything backs up in the gateway,
// so a bound of 500,000 passed or failed on how much the buffer had grown.
// Even 1,000,000 went through once in five suite runs (the kernel's
// buffering of a loopback connection is not ours to bound), so frames that
// all go through fail only if the gateway holds what it could not send:
// its live heap, read while the attacker's connection is still open, must
// stay within 8 MiB of where it stood before the attacks.
func flood(t *testing.T, c *rawH2, what string, heldHeap func() int64, write func() error) {
	t.Helper()
	var err error
	n := 0
	for ; n < 1000000 && err == nil; n++ {
		if n%1000 == 0 {
			c.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		}
		err = write()
	}
	var ne net.Error
	switch {
	case err == nil:
		if grown := heldHeap(); grown > 8<<20 {
			t.Fatalf("%d %s frames from a peer that reads nothing went through, and the gateway holds %d more bytes: neither cut nor held back", n, what, grown)
		} else {
			t.Logf("%s flood: %d frames went through; the gateway holds %+d bytes more than before the attacks", what, n, grown)
		}
	case errors.As(err, &ne) && ne.Timeout():
		t.Logf("%s flood: the gateway stopped reading after %d frames", what, n)
	default:
		t.Logf("%s flood: cut after %d frames (%v)", what, n, err)
	}
}

// TestHTTP2AbuseBounded drives the HTTP/2 attacks of the last years at
// the gateway with a raw framer, each on its own connection while another
// client keeps making requests: the attacker's connection is cut (or its
// streams refused, or no longer read), the upstream never holds more than
// the stream limit from streams kept open, the other client is served
// throughout, and the gateway's live heap comes back to where it was.
func TestHTTP2AbuseBounded(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	body := fmt.Sprintf(`
[[limits]]
name = "generous"
rates = ["1000000/minute"]

[[routes]]
name = "slow"
path_prefix = "/slow"
upstream = %q
limits = ["generous"]

[[routes]]
name = "ok"
path_prefix = "/ok"
respond = { body = "ok" }
limits = ["generous"]
`, up.URL)
	pr := protocol{name: "h2c", proto: "HTTP/2.0", h2c: true}
	data, _, _, _ := frontData(t, pr, t.TempDir(), "", "", body)
	data["Front"] = fmt.Sprintf("h2c = true\nhttp2_max_concurrent_streams = %d", abuseStreams)
	g := startGateway(t, "front.toml.tmpl", gwOpts{Data: data})
	host := g.Listen
	okURL := "http://" + g.Listen + "/ok"
	checkProto(t, protoClient(t, pr, nil, nil), okURL, pr)
	heap0 := liveHeap(t, g)
	heldHeap := func() int64 { return liveHeap(t, g) - heap0 }

	attacks := []struct {
		name string
		// run attacks over c and returns what it checks after the
		// bystander stopped.
		run func(t *testing.T, c *rawH2)
	}{
		{"rapid reset", func(t *testing.T, c *rawH2) {
			// HEADERS then RST_STREAM at once, 20,000 times. A reset
			// stream's handler keeps its slot until it returns, and more
			// than four times the limit waiting for a slot closes the
			// connection: the attacker is cut off, and only a small
			// share of its streams ever reaches the upstream. (Each one
			// that does is cancelled there, which the upstream notices
			// a little later: its own count of requests at once may run
			// above the gateway's stream limit by those it has not yet
			// seen cancelled, so it is not checked here.)
			before := up.total.Load()
			var err error
			n := 0
			for ; n < 20000 && err == nil; n++ {
				id := uint32(2*n + 1)
				err = c.w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h2Headers(host, "/slow"), EndStream: true, EndHeaders: true})
				if err == nil {
					err = c.w.WriteRSTStream(id, http2.ErrCodeCancel)
				}
			}
			closed, code := c.closed(10 * time.Second)
			reached := up.total.Load() - before
			// Whether the connection is cut (more than four times the
			// limit waiting for a slot) and how many streams reach the
			// upstream depend on how fast the handlers finish, that is
			// on the machine's load: they are reported, not asserted.
			// The bound that holds whatever the load is the one checked
			// for every attack below: the gateway never runs more
			// handlers at once than the stream limit.
			t.Logf("rapid reset: %d streams opened and reset (write error %v, connection closed %v: %s); %d reached the upstream", n, err, closed, code, reached)
		}},
		{"CONTINUATION flood", func(t *testing.T, c *rawH2) {
			// One header block that never ends: CONTINUATION frames of
			// valid header fields, up to 10 MB.
			err := c.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Headers(host, "/ok"), EndStream: true})
			junk := h2Headers(host, "/ok", "x-junk", strings.Repeat("j", 8000))
			sent := 0
			for sent < 10<<20 && err == nil {
				err = c.w.WriteContinuation(1, false, junk)
				sent += len(junk)
			}
			closed, code := c.closed(10 * time.Second)
			if !closed {
				t.Fatalf("a header block of %d bytes in CONTINUATION frames: the connection is still open", sent)
			}
			if sent >= 10<<20 && err == nil {
				t.Errorf("the gateway read 10 MB of one header block (max_header_bytes is 64 KiB) before closing (%s)", code)
			}
			t.Logf("CONTINUATION flood: cut after %d bytes sent (%s)", sent, code)
		}},
		{"too many concurrent streams", func(t *testing.T, c *rawH2) {
			// 10 times the limit at once, none reset: the extra ones
			// are refused, the upstream holds at most the limit.
			for i := uint32(0); i < 10*abuseStreams; i++ {
				if err := c.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 2*i + 1, BlockFragment: h2Headers(host, "/slow"), EndStream: true, EndHeaders: true}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				c.mu.Lock()
				rsts, responses := c.rsts, c.responses
				c.mu.Unlock()
				if rsts+responses >= 10*abuseStreams {
					if rsts < 9*abuseStreams {
						t.Errorf("%d of %d streams above the limit of %d were refused", rsts, 10*abuseStreams, abuseStreams)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 10s: %d refused, %d answered of %d streams", rsts, responses, 10*abuseStreams)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}},
		{"SETTINGS flood", func(t *testing.T, c *rawH2) {
			// SETTINGS frames that must each be acknowledged, from a
			// peer that reads none of the acknowledgements.
			flood(t, c, "SETTINGS", heldHeap, func() error {
				return c.w.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
			})
		}},
		{"PING flood", func(t *testing.T, c *rawH2) {
			flood(t, c, "PING", heldHeap, func() error { return c.w.WritePing(false, [8]byte{1}) })
		}},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			// The upstream notices a cancelled request only when its
			// handler returns, and the gateway may still start the
			// queued handlers of an earlier attack's closed connection
			// (the stream limit bounds handlers per connection): wait
			// until the upstream is empty and has seen no new request
			// for 300 ms, so that its peak counts this attack's alone.
			// On a loaded machine some may still be there after the
			// wait: the peak is read above them (never more than this
			// attack's own peak, so a breach still fails).
			quiet, seen := time.Now(), up.total.Load()
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				if n := up.total.Load(); n != seen || up.inflight.Load() > 0 {
					quiet, seen = time.Now(), n
				} else if time.Since(quiet) >= 300*time.Millisecond {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			up.peak.Store(0)
			left := up.inflight.Load()
			active := sampleActive(t, g)
			stop := bystander(t, okURL)
			// The control-frame floods read nothing and shrink their
			// receive buffer, so the gateway's answers back up at once.
			isFlood := a.name == "SETTINGS flood" || a.name == "PING flood"
			rcv := 0
			if isFlood {
				rcv = 4096
			}
			c := dialRawH2(t, g.Listen, rcv, !isFlood)
			a.run(t, c)
			c.conn.Close()
			time.Sleep(200 * time.Millisecond)
			ok, failed, first := stop()
			// The gateway's own handlers at once: the attacker's streams
			// up to the limit, the bystander's request and this
			// sampler's view of one more in passing.
			if p := active(); p > abuseStreams+2 {
				t.Errorf("the gateway ran %d requests at once, above the stream limit %d", p, abuseStreams)
			}
			if failed > 0 || ok == 0 {
				t.Errorf("the other client: %d served, %d failed (first: %v) during the attack", ok, failed, first)
			}
			// The gateway's handlers are bounded exactly (above); the
			// upstream's own count runs a little above them by the
			// exchanges it has not yet seen end (two loaded suite runs
			// read 23 and 25 against a limit of 20), so it is held to
			// half the limit more: an attack past the stream limit
			// would put up to 10 times the limit there at once.
			if p := up.peak.Load() - left; a.name != "rapid reset" && p > abuseStreams*3/2 {
				t.Errorf("the upstream held %d requests at once (%d of an earlier attack's left), far above the stream limit %d", p, left, abuseStreams)
			}
			if r := do(t, protoClient(t, pr, nil, nil), "GET", okURL, nil); r.Status != 200 {
				t.Errorf("after the attack: %s", r)
			}
		})
	}
	// Everything the attacks made the gateway hold is gone once their
	// connections are.
	time.Sleep(300 * time.Millisecond)
	grown := liveHeap(t, g) - heap0
	t.Logf("live heap after the attacks: %+d bytes", grown)
	if grown > 8<<20 {
		t.Errorf("the gateway's live heap grew by %d bytes over the attacks", grown)
	}
}

// TestHTTP2ResetReleasesSlots: HTTP/2 streams reset while they hold a
// concurrency slot (waiting on a slow upstream) give it back, on both
// stores: a client cannot lock a limit shut, or leak its own slots, by
// resetting streams instead of waiting for answers.
func TestHTTP2ResetReleasesSlots(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			up := newSlowUpstream(t)
			body := fmt.Sprintf(`
[[limits]]
name = "slots"
algorithm = "concurrency"
max_in_flight = 2
by = ["api_key"]

[[routes]]
name = "slow"
path_prefix = "/slow"
upstream = %q
limits = ["slots"]
`, up.URL)
			f := startFront(t, protocols[1], store == "redis", body)
			// A first request of another key, answered: the store is
			// ready (on Redis, its code loaded and its connections open)
			// before the resets, which must find decisions quick enough
			// for some of them to reach the upstream.
			if r := do(t, f.client(t), "GET", f.url("/slow"), map[string]string{"X-API-Key": "warm"}); r.Status != 200 {
				t.Fatalf("warm-up request: %s", r)
			}
			base := up.total.Load()
			c := dialRawH2(t, f.Listen, 0, true)
			// Rounds of 200 streams of one API key, each reset right
			// after its headers, some while holding a slot; a round
			// whose streams all ended before reaching the upstream (a
			// loaded machine) is followed by one that waits longer
			// before its resets.
			id := uint32(1)
			for round, pause := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
				for i := 0; i < 200; i++ {
					if err := c.w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndStream: true, EndHeaders: true,
						BlockFragment: h2Headers(f.Listen, "/slow", "x-api-key", "resetter")}); err != nil {
						t.Fatal(err)
					}
					if i%2 == 0 {
						time.Sleep(pause) // let some reach the upstream first
					}
					if err := c.w.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
						t.Fatal(err)
					}
					id += 2
				}
				if up.total.Load() > base {
					break
				}
				t.Logf("round %d: no reset stream reached the upstream", round+1)
			}
			if up.total.Load() == base {
				t.Fatal("no reset stream reached the upstream in 3 rounds: the test held no slot")
			}
			// Every slot comes back: two requests at once are admitted. A
			// reset stream's handler can still be queued behind the
			// stream limit when the usage first reads 0 (the server
			// starts it later, on a cancelled context, and it holds a
			// slot for a moment), so the pair is tried until the
			// deadline: a slot that never comes back fails it.
			deadline := time.Now().Add(10 * time.Second)
			cl := f.client(t)
			for {
				u := limitUsage(t, f.gw, "", "slots", "api_key:resetter")
				if u.Windows[0].Used == 0 {
					codes := pairOfRequests(cl, f.url("/slow"), "resetter")
					if codes[0] == 200 && codes[1] == 200 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("10 s after the resets, two requests at once got %v, want 200 and 200", codes)
					}
				} else if time.Now().After(deadline) {
					t.Fatalf("10 s after the resets, %d of 2 slots are still held", u.Windows[0].Used)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// pairOfRequests sends two requests of one API key at once and returns
// their statuses (0 for a request that failed).
func pairOfRequests(cl *http.Client, url, apiKey string) [2]int {
	var wg sync.WaitGroup
	var codes [2]int
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := tryDo(cl, "GET", url, map[string]string{"X-API-Key": apiKey}, nil); err == nil {
				codes[i] = r.Status
			}
		}()
	}
	wg.Wait()
	return codes
}

// sampleActive polls the gateway's http_server_active_requests every
// 10 ms until the returned function is called, which returns the highest
// value seen.
func sampleActive(t *testing.T, g *gw) func() int64 {
	t.Helper()
	var peak atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if r, err := tryDo(c, "GET", g.adminURL("/metrics"), nil, nil); err == nil {
				for _, line := range strings.Split(string(r.Body), "\n") {
					if v, ok := strings.CutPrefix(line, "http_server_active_requests "); ok {
						if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && int64(n) > peak.Load() {
							peak.Store(int64(n))
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		cancel()
		<-done
		return peak.Load()
	}
}
