package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/testupstream"
)

// heldOrShed sends n held requests at once and sorts them as the gateway
// answers them: admitted (they reach the gate and stay there) or shed
// (503). Any other answer fails the test. The admitted ones are still
// held when it returns.
func heldOrShed(t *testing.T, gt *gate, url, prefix string, n int, hdr map[string]string) (in []*held, shedN int) {
	t.Helper()
	hs := map[string]*held{}
	for i := range n {
		h := hold(t, url, fmt.Sprintf("%s-%d", prefix, i), hdr)
		hs[h.name] = h
	}
	deadline := time.After(30 * time.Second)
	for len(hs) > 0 {
		select {
		case name := <-gt.arrived:
			if h := hs[name]; h != nil {
				in = append(in, h)
				delete(hs, name)
			}
			continue
		case <-deadline:
			t.Fatalf("%s: %d of %d requests neither arrived nor were answered within 30s", prefix, len(hs), n)
		case <-time.After(5 * time.Millisecond):
		}
		for name, h := range hs {
			select {
			case r := <-h.done:
				if r == nil || r.Status != 503 {
					t.Fatalf("%s: request %s answered %v, want it held (admitted) or 503", prefix, name, r)
				}
				shedN++
				delete(hs, name)
			default:
			}
		}
	}
	return in, shedN
}

// TestAdaptiveProbeWaitKeepsLimit: while the base latency is measured (a
// new limiter measures first) the admission threshold is halved and the
// requests within the full limit wait for the measure's end instead of
// being refused. Requests that waited out the measure were each admitted
// once it timed out, however many had come: with the limit at 4, two held
// at the upstream and six more sent, all eight reached the upstream.
// Within the full limit only two more may.
func TestAdaptiveProbeWaitKeepsLimit(t *testing.T) {
	gt := newGate(t)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(gt.URL, `min_in_flight = 1
max_in_flight = 4`)}})
	url := g.url("/x")
	first := []*held{holdAdmitted(t, gt, url, "probe-a", nil), holdAdmitted(t, gt, url, "probe-b", nil)}
	in, shedN := heldOrShed(t, gt, url, "probe-more", 6, nil)
	s := adaptiveState(t, g)
	if len(in) > 2 || s.InFlight > 4 {
		t.Errorf("limit 4, two held: %d more admitted, %d shed, %d in flight; want at most 2 more and 4 in flight", len(in), shedN, s.InFlight)
	}
	for _, h := range append(first, in...) {
		finish(t, gt, h)
	}
	if s := adaptiveState(t, g); s.InFlight != 0 {
		t.Errorf("after every request ended: %d in flight, want 0", s.InFlight)
	}
}

// TestAdaptiveUpgradeSampleIsTimeTo101: an upgraded (WebSocket) exchange
// is answered when the upstream's 101 arrives; the tunnel after it lasts
// as long as its ends like. The limiter's sample is the time to the 101,
// as it is the time to the response header of any other answer: sixteen
// tunnels open for 3s, then eight quick requests, must not teach the limit
// a base latency of seconds (it took the tunnels' whole lives before).
func TestAdaptiveUpgradeSampleIsTimeTo101(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			testupstream.EchoTunnel(w)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(func() {
		up.CloseClientConnections()
		up.Close()
	})
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(up.URL, `min_in_flight = 32
max_in_flight = 32`) + "upgrades = [\"websocket\"]\n"}})
	const tunnels = 16
	var conns []net.Conn
	for i := range tunnels {
		conn := rawConn(t, g.Listen)
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET /chat HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", g.Listen)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("tunnel %d: %v %v, want 101", i, resp, err)
		}
		conns = append(conns, conn)
	}
	if s := adaptiveState(t, g); s.InFlight != tunnels {
		t.Fatalf("with %d tunnels open: %+v, want each holding its slot", tunnels, s)
	}
	time.Sleep(3 * time.Second) // the tunnels' life, which is no latency
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for adaptiveState(t, g).InFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("tunnels closed 20s ago still hold slots: %+v", adaptiveState(t, g))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond) // past the sample window's least length
	for i := range 8 {
		if r := do(t, http.DefaultClient, "GET", g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
	}
	s := adaptiveState(t, g)
	if s.SampleMS == 0 {
		t.Fatalf("%+v: no window closed", s)
	}
	if s.SampleMS >= 1500 || s.MinLatencyMS >= 1500 {
		t.Errorf("base %vms, sample %vms: the tunnels' 3s lives were taken for the upstream's latency", s.MinLatencyMS, s.SampleMS)
	}
}

// TestAdaptiveSlowUploadIsNotLatency: a client that trickles its request
// body makes the upstream wait for it, but that wait is the client's pace,
// not the upstream's latency. Twelve uploads of 10 bytes at one byte each
// 300ms must not teach the limit a base latency of seconds: enough such
// clients would drive the limit down for everyone (they did: the sample
// was the time from the forward's start to the response header).
func TestAdaptiveSlowUploadIsNotLatency(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(up.URL, `min_in_flight = 24
max_in_flight = 24`)}})
	const uploads = 12
	errs := make(chan error, uploads)
	for range uploads {
		go func() {
			conn := rawConn(t, g.Listen)
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "POST /up HTTP/1.1\r\nHost: %s\r\nContent-Length: 10\r\n\r\n", g.Listen)
			for range 10 {
				time.Sleep(300 * time.Millisecond)
				if _, err := conn.Write([]byte("x")); err != nil {
					errs <- err
					return
				}
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			errs <- err
		}()
	}
	for range uploads {
		if err := <-errs; err != nil {
			t.Fatalf("slow upload: %v", err)
		}
	}
	time.Sleep(150 * time.Millisecond) // past the sample window's least length
	if r := do(t, http.DefaultClient, "GET", g.url("/x"), nil); r.Status != 200 {
		t.Fatalf("quick request: %s", r)
	}
	s := adaptiveState(t, g)
	if s.SampleMS == 0 {
		t.Fatalf("%+v: no window closed", s)
	}
	if s.SampleMS >= 1500 || s.MinLatencyMS >= 1500 {
		t.Errorf("base %vms, sample %vms: the clients' 3s uploads were taken for the upstream's latency", s.MinLatencyMS, s.SampleMS)
	}
}

// TestAdaptiveOffline: `gateway test` and `gateway replay` decide one
// request at a time, each ended before the next, so an adaptive limit
// (like a concurrency limit) never binds there, even at a ceiling of one:
// a defined answer, not a wait on the wall clock or a shed.
func TestAdaptiveOffline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.toml")
	cases := filepath.Join(dir, "gateway.cases.toml")
	logf := filepath.Join(dir, "access.jsonl")
	var log strings.Builder
	for range 20 {
		log.WriteString(`{"time":"2026-01-01T00:00:00Z","method":"GET","path":"/x","status":200,"client":"k","route":"all"}` + "\n")
	}
	for p, s := range map[string]string{
		cfg: "[store]\nbackend = \"memory\"\n\n" + adaptiveBody("http://127.0.0.1:9", `min_in_flight = 1
max_in_flight = 1
priority_header = "X-Priority"
priority_trusted_from = ["127.0.0.0/8"]`),
		cases: `[[cases]]
name = "one at a time"
  [[cases.steps]]
  at = "0s"
  request = { path = "/x", headers = { "X-Priority" = "sheddable" }, count = 20 }
  expect = { status = [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200] }
`,
		logf: log.String(),
	} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, stderr := runGateway(t, nil, "test", "--config", cfg, cases); code != 0 || !strings.Contains(stdout, "PASS") {
		t.Errorf("gateway test with an adaptive limit: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr := runGateway(t, nil, "replay", "--config", cfg, "--log", logf)
	if code != 0 || !strings.Contains(stdout, "replayed 20 requests") || strings.Contains(stdout, "shed") {
		t.Errorf("gateway replay with an adaptive limit: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("replay:\n%s", stdout)
}

// TestAdaptiveClientErrorsAreNotLatency: a client chooses a 4xx (a path
// that does not exist, a missing credential), and an upstream answers it
// at once. Counted as samples, a client's flood of them while the base
// latency is measured taught a base of a fraction of a millisecond, after
// which every real answer looked like a queue and the limit fell to its
// floor for everyone. A 4xx is no sample (a 429, the upstream's own
// refusal, counts as a failure): the base is the real requests' 50ms.
func TestAdaptiveClientErrorsAreNotLatency(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/busy":
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			time.Sleep(50 * time.Millisecond)
			w.Write([]byte("ok"))
		}
	}))
	t.Cleanup(up.Close)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(up.URL, `min_in_flight = 16
max_in_flight = 16`)}})
	for i := range 16 {
		path := "/missing"
		if i%2 == 1 {
			path = "/busy"
		}
		if r := do(t, http.DefaultClient, "GET", g.url(path), nil); r.Status != 404 && r.Status != 429 {
			t.Fatalf("%s: %s", path, r)
		}
	}
	for i := range 10 {
		if r := do(t, http.DefaultClient, "GET", g.url("/ok"), nil); r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
	}
	s := adaptiveState(t, g)
	if s.MinLatencyMS < 25 {
		t.Errorf("base latency %vms after 404s and 429s then 50ms answers: the clients' errors were taken for the upstream's latency", s.MinLatencyMS)
	}
}

// TestAdaptiveReloadWhileWaiting: requests waiting for a slot (max_delay)
// belong to the limiter they waited on: a reload that changes the limit's
// numbers, then one that removes the limit, leaves them waiting there, and
// each is admitted when a request of that limiter ends; nothing panics,
// nothing stays held, and the gateway serves on.
func TestAdaptiveReloadWhileWaiting(t *testing.T) {
	gt := newGate(t)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(gt.URL, `min_in_flight = 2
max_in_flight = 2
max_delay = "30s"`)}})
	url := g.url("/x")
	a, b := holdAdmitted(t, gt, url, "rl-a", nil), holdAdmitted(t, gt, url, "rl-b", nil)
	w1, w2 := hold(t, url, "rl-w1", nil), hold(t, url, "rl-w2", nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := do(t, http.DefaultClient, "GET", g.adminURL("/admin/limits?limit=up"), nil)
		if strings.Contains(strings.ReplaceAll(string(r.Body), " ", ""), `"waiting":2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two requests not waiting after 15s: %s", r.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	reloadBody(t, g, adaptiveBody(gt.URL, `min_in_flight = 3
max_in_flight = 3
reserve = 0.2
max_delay = "30s"`))
	reloadBody(t, g, fmt.Sprintf("[[routes]]\nname = \"all\"\npath_prefix = \"/\"\nupstream = %q\n", gt.URL))
	for _, step := range []struct{ end, next *held }{{a, w1}, {b, w2}} {
		gt.let(step.end.name)
		select {
		case got := <-gt.arrived:
			if got != step.next.name && got != w1.name && got != w2.name {
				t.Fatalf("after %s ended, %s arrived, want a waiter", step.end.name, got)
			}
		case r := <-w1.done:
			t.Fatalf("a waiter was answered %v instead of admitted", r)
		case r := <-w2.done:
			t.Fatalf("a waiter was answered %v instead of admitted", r)
		case <-time.After(15 * time.Second):
			t.Fatalf("after %s ended, no waiter reached the upstream within 15s", step.end.name)
		}
		if r := <-step.end.done; r == nil || r.Status != 200 {
			t.Fatalf("%s: %v", step.end.name, r)
		}
	}
	finish(t, gt, w1)
	finish(t, gt, w2)
	if r := do(t, http.DefaultClient, "GET", url, nil); r.Status != 200 {
		t.Fatalf("after the reloads: %s", r)
	}
}

// TestAdaptivePriorityForwardedFor: priority_trusted_from is matched
// against the direct peer only. A client on loopback naming a trusted
// address in X-Forwarded-For, Forwarded or X-Real-IP is still an
// untrusted peer: its "critical" is not believed and, with the normal
// share of the limit taken, it is shed.
func TestAdaptivePriorityForwardedFor(t *testing.T) {
	gt := newGate(t)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(gt.URL, `min_in_flight = 2
max_in_flight = 2
reserve = 0.5
priority_header = "X-Priority"
priority_trusted_from = ["10.0.0.0/8"]`)}})
	url := g.url("/x")
	h := holdAdmitted(t, gt, url, "xff-held", nil)
	defer finish(t, gt, h)
	for _, hdr := range []map[string]string{
		{"X-Forwarded-For": "10.0.0.1"},
		{"X-Forwarded-For": "10.0.0.1, 10.0.0.2"},
		{"Forwarded": "for=10.0.0.1"},
		{"X-Real-IP": "10.0.0.1"},
	} {
		hdr["X-Priority"] = "critical"
		if r := do(t, http.DefaultClient, "GET", url, hdr); r.Status != 503 {
			t.Errorf("critical with %v from loopback: %s, want 503 (normal, shed)", hdr, r)
		}
	}
}
