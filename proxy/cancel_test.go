package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestCanceledBeforeDecision: a request whose client went away before its
// decision (a reset HTTP/2 stream that queued behind the stream limit) is
// neither decided nor counted: the limit's one request is still there for
// the next one.
func TestCanceledBeforeDecision(t *testing.T) {
	h, _, up := canceledSetup(t)
	canceledThenDecided(t, h)
	if n := up.hits.Load(); n != 1 {
		t.Errorf("upstream saw %d requests, want 1", n)
	}
}

// canceledSetup is the handler of the canceled-request tests: one route
// under a limit of one request a minute, on the memory store.
func canceledSetup(t *testing.T) (*proxy.Handler, *policy.Policy, *upstream) {
	t.Helper()
	up := newUpstream(t, nil)
	p := compile(t, func(c *config.Config) {
		c.Limits = []config.LimitConfig{limit("api", "fixed_window", "1/minute")}
		c.Routes = []config.RouteConfig{route("api", "/api", up.URL, "api")}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return h, p, up
}

// canceledThenDecided sends three requests whose client has gone (each
// answered 499), then two live ones: the first allowed, the second
// denied, so that the canceled ones counted nothing.
func canceledThenDecided(t *testing.T, h http.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, "GET", "/api/x", nil))
		if w.Code != 499 {
			t.Fatalf("canceled request: status %d, want 499", w.Code)
		}
	}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/api/x", nil))
		if w.Code != want {
			t.Fatalf("request %d after the canceled ones: status %d, want %d", i+1, w.Code, want)
		}
	}
}

// TestCanceledBeforeDecisionCandidate: a candidate configuration does not
// count what the live one leaves uncounted. A request whose client went
// away before its live decision is neither decided nor recorded by the
// candidate: a client resetting streams by the thousand would otherwise
// spend the candidate's store calls and fill its counters, and the
// candidate would report denials that, promoted, it would never make.
func TestCanceledBeforeDecisionCandidate(t *testing.T) {
	h, p, _ := canceledSetup(t)
	var mu sync.Mutex
	var recorded []proxy.CandidateOutcome
	h.SetCandidate(&proxy.Candidate{Policy: p, Store: memstore.New(memstore.Options{}), Record: func(o *proxy.CandidateOutcome) {
		mu.Lock()
		defer mu.Unlock()
		recorded = append(recorded, proxy.CandidateOutcome{Path: o.Path,
			LiveDenied: append([]string(nil), o.LiveDenied...), CandidateDenied: append([]string(nil), o.CandidateDenied...)})
	}})
	canceledThenDecided(t, h)
	mu.Lock()
	defer mu.Unlock()
	// The two decided requests only, each decided alike by both.
	if len(recorded) != 2 {
		t.Fatalf("candidate recorded %d requests, want 2 (the canceled ones are not): %+v", len(recorded), recorded)
	}
	if len(recorded[0].LiveDenied) != 0 || len(recorded[0].CandidateDenied) != 0 {
		t.Errorf("first decided request: live denied %v, candidate denied %v; want both allowed",
			recorded[0].LiveDenied, recorded[0].CandidateDenied)
	}
	if len(recorded[1].LiveDenied) != 1 || len(recorded[1].CandidateDenied) != 1 {
		t.Errorf("second decided request: live denied %v, candidate denied %v; want both denied",
			recorded[1].LiveDenied, recorded[1].CandidateDenied)
	}
}

// TestPipelinedHalfClose: a client that pipelines requests and half-closes
// its connection (net/http then cancels their contexts) cannot get one
// forwarded uncounted: whichever are answered 499 before their decision,
// the upstream sees no more than the limit admits, on a forwarding route
// and on a respond route.
func TestPipelinedHalfClose(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *config.Config) {
		c.Limits = []config.LimitConfig{limit("api", "fixed_window", "2/minute")}
		resp := route("respond", "/respond", "", "api")
		resp.Respond = &config.RespondConfig{Status: 200, Body: "hi"}
		c.Routes = []config.RouteConfig{route("api", "/api", up.URL, "api"), resp}
	})
	rec := &recorder{}
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	admitted := 0
	for _, path := range []string{"/api/x", "/respond", "/api/x"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		}
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				admitted++
			case 499, http.StatusTooManyRequests, http.StatusBadGateway:
			default:
				t.Errorf("%s: status %d", path, resp.StatusCode)
			}
		}
		c.Close()
	}
	for range 3 {
		if get(t, gw.URL+"/api/x").StatusCode == http.StatusOK {
			admitted++
		}
	}
	if admitted > 2 || up.hits.Load() > 2 {
		t.Errorf("%d answered 200 and %d reached the upstream under a limit of 2", admitted, up.hits.Load())
	}
}
