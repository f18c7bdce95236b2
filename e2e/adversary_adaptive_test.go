package e2e

import (
	"fmt"
	"testing"
	"time"
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
