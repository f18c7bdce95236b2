package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestRouteTimeouts is the table of what an upstream can do against a
// route's timeout (headers budget) and idle_timeout (silence between body
// bytes), and what the client gets: the headers budget never cuts a body,
// the idle budget cuts only a silent one.
func TestRouteTimeouts(t *testing.T) {
	// The upstream waits headerDelay, sends its headers, then n parts with
	// gap between them.
	type upstreamPlan struct {
		headerDelay, gap time.Duration
		parts            int
	}
	tests := []struct {
		name          string
		timeout, idle string
		up            upstreamPlan
		status        int
		whole         bool // the whole body arrives without error
		outcome       proxy.Outcome
	}{
		{"fast", "1s", "", upstreamPlan{0, 0, 3}, 200, true, proxy.OutcomeForwarded},
		{"headers late", "100ms", "", upstreamPlan{400 * time.Millisecond, 0, 1}, 504, false, proxy.OutcomeUpstreamError},
		{"body longer than the timeout", "100ms", "", upstreamPlan{0, 60 * time.Millisecond, 6}, 200, true, proxy.OutcomeForwarded},
		{"gaps within idle", "100ms", "300ms", upstreamPlan{0, 60 * time.Millisecond, 6}, 200, true, proxy.OutcomeForwarded},
		{"a gap past idle", "1s", "50ms", upstreamPlan{0, 250 * time.Millisecond, 3}, 200, false, proxy.OutcomeUpstreamError},
		{"headers late, idle set", "100ms", "1s", upstreamPlan{400 * time.Millisecond, 0, 1}, 504, false, proxy.OutcomeUpstreamError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(tc.up.headerDelay):
				case <-r.Context().Done():
					return
				}
				w.WriteHeader(200)
				for i := 0; i < tc.up.parts; i++ {
					if i > 0 {
						select {
						case <-time.After(tc.up.gap):
						case <-r.Context().Done():
							return
						}
					}
					fmt.Fprintf(w, "part %d;", i)
					w.(http.Flusher).Flush()
				}
			}))
			defer up.Close()
			p := compile(t, func(c *config.Config) {
				rt := route("up", "/", up.URL)
				rt.Timeout, rt.IdleTimeout = tc.timeout, tc.idle
				c.Routes = []config.RouteConfig{rt}
			})
			events := make(chan proxy.Event, 1)
			h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}),
				Observer: observerFunc(func(ev *proxy.Event) { events <- *ev })})
			if err != nil {
				t.Fatal(err)
			}
			gw := gateway(t, h)
			resp, err := http.Get(gw.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			want := ""
			for i := 0; i < tc.up.parts; i++ {
				want += fmt.Sprintf("part %d;", i)
			}
			whole := err == nil && string(body) == want
			if resp.StatusCode != tc.status || whole != tc.whole {
				t.Errorf("status %d, body %q (err %v); want status %d, whole body %v", resp.StatusCode, body, err, tc.status, tc.whole)
			}
			select {
			case ev := <-events:
				if ev.Outcome != tc.outcome || ev.Status != tc.status {
					t.Errorf("observed outcome %s status %d, want %s %d", ev.Outcome, ev.Status, tc.outcome, tc.status)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no event observed")
			}
		})
	}
}

// observerFunc adapts a function to proxy.Observer.
type observerFunc func(*proxy.Event)

func (f observerFunc) Observe(ev *proxy.Event) { f(ev) }

// TestRouteTimeoutSlowUpload: a client that trickles its request body
// cannot hold the exchange open past the route's timeout: the budget runs
// from the moment the request goes upstream until the response headers, a
// request body included, and the client is told it was too slow (408).
// Before, the gateway waited on the body for as long as the client kept
// sending, whatever the timeout.
func TestRouteTimeoutSlowUpload(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "read it all")
	}))
	defer up.Close()
	p := compile(t, func(c *config.Config) {
		rt := route("up", "/", up.URL)
		rt.Timeout = "200ms"
		c.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer pw.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	req, _ := http.NewRequest("POST", gw.URL+"/upload", pr)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("the exchange did not end with an answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
}
