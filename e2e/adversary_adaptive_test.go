package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
