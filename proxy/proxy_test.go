package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"

	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// upstream is a real HTTP server that records what it received.
type upstream struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	headers http.Header
	path    string
}

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.headers = r.Header.Clone()
		u.path = r.URL.Path
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprint(w, "upstream ok")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last() (http.Header, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers, u.path
}

// compile builds a policy from cfg with every default applied.
func compile(t *testing.T, mutate func(c *policy.Config)) *policy.Policy {
	t.Helper()
	return policytest.Compile(t, mutate)
}

func limit(name, algorithm string, rates ...string) policy.LimitConfig {
	l := policy.DefaultLimit()
	l.Name, l.Algorithm, l.Rates = name, algorithm, rates
	return l
}

func route(name, prefix, upstreamURL string, limits ...string) policy.RouteConfig {
	r := policy.DefaultRoute()
	r.Name, r.PathPrefix, r.Upstream, r.Limits = name, prefix, upstreamURL, limits
	return r
}

// gateway serves h over a real listener, as in production.
func gateway(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// serveMemory serves p over a real listener with a fresh memory store.
func serveMemory(t *testing.T, p *policy.Policy) *httptest.Server {
	t.Helper()
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return gateway(t, h)
}

func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestLimitThenForward(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *policy.Config) {
		c.Limits = []policy.LimitConfig{limit("api", "fixed_window", "3/minute")}
		c.Routes = []policy.RouteConfig{route("api", "/api", up.URL, "api")}
	})
	gw := serveMemory(t, p)
	for i := range 3 {
		if resp := get(t, gw.URL+"/api/x"); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i+1, resp.StatusCode)
		}
	}
	resp := get(t, gw.URL+"/api/x")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429", resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q, want ≥ 1", ra)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("upstream saw %d requests, want 3 (denied requests are not forwarded)", got)
	}
	// Another client (by API key) has its own budget.
	if resp := get(t, gw.URL+"/api/x", "X-API-Key", "other"); resp.StatusCode != 200 {
		t.Errorf("other client: status %d, want 200", resp.StatusCode)
	}
}

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
	p := compile(t, func(c *policy.Config) {
		c.Limits = []policy.LimitConfig{limit("api", "fixed_window", "1/minute")}
		c.Routes = []policy.RouteConfig{route("api", "/api", up.URL, "api")}
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
	p := compile(t, func(c *policy.Config) {
		c.Limits = []policy.LimitConfig{limit("api", "fixed_window", "2/minute")}
		resp := route("respond", "/respond", "", "api")
		resp.Respond = &policy.RespondConfig{Status: 200, Body: "hi"}
		c.Routes = []policy.RouteConfig{route("api", "/api", up.URL, "api"), resp}
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

// failingStore is a store whose backend is down: every call fails as a
// real store does when its deadline passes.
type failingStore struct{ calls atomic.Int64 }

func (f *failingStore) Decide(ctx context.Context, _ time.Time, _ []ratelimit.Hit, _ []ratelimit.Decision) (bool, error) {
	f.calls.Add(1)
	return false, fmt.Errorf("%w: connection refused", ratelimit.ErrStore)
}
func (f *failingStore) Release(context.Context, []ratelimit.Hit, []ratelimit.Decision) error {
	return fmt.Errorf("%w: connection refused", ratelimit.ErrStore)
}
func (f *failingStore) Usage(context.Context, time.Time, *ratelimit.Limit, string) ([]ratelimit.WindowUsage, error) {
	return nil, ratelimit.ErrStore
}
func (f *failingStore) Reset(context.Context, *ratelimit.Limit, string) error {
	return ratelimit.ErrStore
}
func (f *failingStore) Close() error { return nil }

func TestStoreFailurePolicies(t *testing.T) {
	for _, tc := range []struct {
		onError    string
		wantStatus []int // for requests 1..3 with a limit of 2
		wantHeader bool  // rate-limit headers on the first response
	}{
		{"local", []int{200, 200, 429}, true},
		{"allow", []int{200, 200, 200}, false},
		{"deny", []int{503, 503, 503}, false},
	} {
		t.Run(tc.onError, func(t *testing.T) {
			up := newUpstream(t, nil)
			p := compile(t, func(c *policy.Config) {
				c.Store.OnError = tc.onError
				c.Limits = []policy.LimitConfig{limit("api", "sliding_window_log", "2/minute")}
				c.Routes = []policy.RouteConfig{route("api", "/", up.URL, "api")}
			})
			fs := &failingStore{}
			h, err := proxy.New(p, proxy.Options{Store: fs, Local: memstore.New(memstore.Options{})})
			if err != nil {
				t.Fatal(err)
			}
			gw := gateway(t, h)
			for i, want := range tc.wantStatus {
				resp := get(t, gw.URL+"/x")
				if resp.StatusCode != want {
					t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
				}
				if i == 0 && (resp.Header.Get("RateLimit") != "") != tc.wantHeader {
					t.Errorf("RateLimit header %q, want present=%v", resp.Header.Get("RateLimit"), tc.wantHeader)
				}
				if want == 503 && resp.Header.Get("Retry-After") == "" {
					t.Errorf("503 without Retry-After")
				}
			}
			if fs.calls.Load() != int64(len(tc.wantStatus)) {
				t.Errorf("store called %d times, want %d", fs.calls.Load(), len(tc.wantStatus))
			}
		})
	}
}

func TestShadowLimitNeverDenies(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *policy.Config) {
		l := limit("candidate", "fixed_window", "1/minute")
		l.Mode = "shadow"
		c.Limits = []policy.LimitConfig{l}
		c.Routes = []policy.RouteConfig{route("api", "/", up.URL, "candidate")}
	})
	var obs recorder
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: &obs})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	for i := range 3 {
		resp := get(t, gw.URL+"/x")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200 (shadow never denies)", i+1, resp.StatusCode)
		}
		if v := resp.Header.Get("RateLimit-Policy"); strings.Contains(v, "candidate") {
			t.Errorf("shadow limit in RateLimit-Policy: %q", v)
		}
	}
	if got := obs.shadowDenied.Load(); got != 2 {
		t.Errorf("observer saw %d shadow denials, want 2", got)
	}
}

// recorder is an Observer that counts outcomes.
type recorder struct {
	shadowDenied atomic.Int64
	outcomes     sync.Map // proxy.Outcome → *atomic.Int64
}

func (r *recorder) Observe(ev *proxy.Event) {
	for i, h := range ev.Hits {
		if h.Limit.Shadow && !ev.Decisions[i].Allowed {
			r.shadowDenied.Add(1)
		}
	}
	v, _ := r.outcomes.LoadOrStore(ev.Outcome, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (r *recorder) count(o proxy.Outcome) int64 {
	v, ok := r.outcomes.Load(o)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// TestConcurrencySlotReleased checks that a concurrency slot comes back
// whatever ends the request: success, upstream failure, route timeout,
// the upstream cutting the body, the client hanging up.
func TestConcurrencySlotReleased(t *testing.T) {
	release := make(chan struct{})
	var slowSeen atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if strings.HasPrefix(path, "/slow") {
			path = "/slow"
			slowSeen.Add(1)
		}
		switch path {
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-release:
			case <-time.After(10 * time.Second):
			}
		case "/cut":
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "/fail":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			fmt.Fprint(w, "ok")
		}
	})
	p := compile(t, func(c *policy.Config) {
		l := policy.DefaultLimit()
		l.Name, l.Algorithm, l.MaxInFlight, l.By = "one-at-a-time", "concurrency", 1, []string{}
		c.Limits = []policy.LimitConfig{l}
		fast := route("fast", "/", up.URL, "one-at-a-time")
		timed := route("timed", "/slow/timeout", up.URL, "one-at-a-time")
		timed.Timeout = "100ms"
		c.Routes = []policy.RouteConfig{fast, timed}
	})
	store := memstore.New(memstore.Options{})
	h, err := proxy.New(p, proxy.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	admitted := func(step string) {
		t.Helper()
		if resp := get(t, gw.URL+"/ok"); resp.StatusCode != 200 {
			t.Fatalf("after %s: status %d, want 200 (slot not released)", step, resp.StatusCode)
		}
	}

	admitted("nothing")
	if resp := get(t, gw.URL+"/fail"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("/fail: status %d, want 502", resp.StatusCode)
	}
	admitted("upstream failure (502)")
	if resp := get(t, gw.URL+"/slow/timeout"); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("/slow/timeout: status %d, want 504", resp.StatusCode)
	}
	admitted("route timeout (504)")
	if resp, err := http.Get(gw.URL + "/cut"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	admitted("upstream cutting the body (handler aborted by panic)")

	// A slow request holds the slot: a second one is denied meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/slow", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	slowBefore := slowSeen.Load()
	waitFor(t, "the slow request to reach the upstream", func() bool { return slowSeen.Load() > slowBefore })
	if resp := get(t, gw.URL+"/ok"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("while the slow request holds the slot: status %d, want 429", resp.StatusCode)
	}
	cancel() // the client hangs up mid-request
	<-done
	waitFor(t, "the slot to come back after the client hung up", func() bool {
		return get(t, gw.URL+"/ok").StatusCode == 200
	})
	close(release)
}

// TestAbortedResponseRunsEveryDefer: when the upstream cuts a response
// body, ReverseProxy aborts the handler by panicking (http.ErrAbortHandler)
// through proceed, serve and ServeHTTP; every deferred step still runs
// once: the concurrency slot comes back, the response is counted, the
// observer records the request and the candidate decides it.
func TestAbortedResponseRunsEveryDefer(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cut" {
			fmt.Fprint(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	p := compile(t, func(c *policy.Config) {
		conc := policy.DefaultLimit()
		conc.Name, conc.Algorithm, conc.MaxInFlight, conc.By = "one-at-a-time", "concurrency", 1, []string{}
		resp := limit("by-response", "fixed_window", "2/1h")
		resp.Count = "response"
		c.Limits = []policy.LimitConfig{conc, resp}
		c.Routes = []policy.RouteConfig{route("api", "/", up.URL, "one-at-a-time", "by-response")}
	})
	rec := &recorder{}
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	var candidates atomic.Int64
	h.SetCandidate(&proxy.Candidate{Policy: p, Store: memstore.New(memstore.Options{}),
		Record: func(*proxy.CandidateOutcome) { candidates.Add(1) }})
	gw := gateway(t, h)
	if resp, err := http.Get(gw.URL + "/cut"); err == nil {
		if _, err := io.Copy(io.Discard, resp.Body); err == nil {
			t.Error("the cut body read to its end")
		}
		resp.Body.Close()
	}
	waitFor(t, "the aborted request's event", func() bool { return rec.count(proxy.OutcomeUpstreamError) == 1 })
	waitFor(t, "the aborted request's candidate decision", func() bool { return candidates.Load() == 1 })
	// The slot is free and the cut response counted one of two.
	if resp := get(t, gw.URL+"/ok"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the aborted request: status %d, want 200", resp.StatusCode)
	}
	if resp := get(t, gw.URL+"/ok"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429 (the cut response not counted)", resp.StatusCode)
	}
	waitFor(t, "every event", func() bool { return rec.count(proxy.OutcomeForwarded)+rec.count(proxy.OutcomeLimited) == 2 })
	if n := rec.count(proxy.OutcomeUpstreamError); n != 1 {
		t.Errorf("%d upstream_error events, want 1", n)
	}
	if n := candidates.Load(); n != 3 {
		t.Errorf("candidate decided %d requests, want 3", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		fmt.Fprint(w, "ok")
	})
	p := compile(t, func(c *policy.Config) {
		c.Limits = []policy.LimitConfig{limit("api", "token_bucket", "50/second")}
		c.Routes = []policy.RouteConfig{route("api", "/", up.URL, "api")}
	})
	gw := serveMemory(t, p)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	run := func() {
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := "/ok"
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if i%5 == 0 {
					path = "/slow"
					time.AfterFunc(20*time.Millisecond, cancel)
				}
				req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+path, nil)
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		client.CloseIdleConnections()
	}
	run() // warm up pools and idle connections
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	run()
	// Connections wind down asynchronously; poll until the count settles.
	deadline := time.Now().Add(10 * time.Second)
	for {
		client.CloseIdleConnections()
		after := runtime.NumGoroutine()
		if after <= before+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestForwardedHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *policy.Config) {
		c.Identity.UserHeader = "X-User-ID"
		c.Identity.TrustedProxies = []string{"10.0.0.0/8"} // not the test client
		rt := route("api", "/v1/api", up.URL)
		rt.StripPrefix = true
		c.Routes = []policy.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	req, _ := http.NewRequest("GET", gw.URL+"/v1/api/items", nil)
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	req.Header.Set("X-Real-IP", "6.6.6.6")
	req.Header.Set("X-User-ID", "admin")
	req.Header.Set("X-Gateway-User", "admin")
	req.Header.Set("Connection", "X-Custom-Hop")
	req.Header.Set("X-Custom-Hop", "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got, path := up.last()
	if path != "/items" {
		t.Errorf("upstream path %q, want /items (strip_prefix)", path)
	}
	if xff := got.Get("X-Forwarded-For"); xff != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want the peer only (client copy dropped)", xff)
	}
	for _, name := range []string{"X-Real-Ip", "X-User-Id", "X-Gateway-User", "X-Custom-Hop"} {
		if v := got.Get(name); v != "" {
			t.Errorf("upstream received client-supplied %s: %q", name, v)
		}
	}
	if got.Get("X-Forwarded-Proto") != "http" || got.Get("X-Forwarded-Host") == "" {
		t.Errorf("X-Forwarded-Proto/Host not set: %v", got)
	}
}

// TestUnderscoreUserHeader: a user header configured with '_' (which
// Go spells "X_user") reaches the upstream only from a trusted peer and
// only in that spelling; an untrusted client's copy, and "X-User" (the
// same variable to CGI-style upstreams) from anyone, are dropped.
func TestUnderscoreUserHeader(t *testing.T) {
	for _, tc := range []struct {
		trusted string // trusted_proxies: the test client is 127.0.0.1
		sent    string
		want    string // the value the upstream receives as X_user; "" none
	}{
		{"10.0.0.0/8", "X_User", ""},
		{"10.0.0.0/8", "X-User", ""},
		{"10.0.0.0/8", "x_user", ""},
		{"127.0.0.0/8", "X_User", "alice"},
		{"127.0.0.0/8", "X-User", ""},
	} {
		up := newUpstream(t, nil)
		p := compile(t, func(c *policy.Config) {
			c.Identity.UserHeader = "X_User"
			c.Identity.TrustedProxies = []string{tc.trusted}
			c.Routes = []policy.RouteConfig{route("api", "/api", up.URL)}
		})
		gw := serveMemory(t, p)
		req, _ := http.NewRequest("GET", gw.URL+"/api/x", nil)
		req.Header[tc.sent] = []string{"alice", "bob"} // written as is
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got, _ := up.last()
		if v := got.Get("X_User"); v != tc.want {
			t.Errorf("trusted %s, %s sent: upstream X_user %q, want %q", tc.trusted, tc.sent, v, tc.want)
		}
		if tc.sent != "X_User" && got.Get("X-User") != "" {
			t.Errorf("trusted %s, %s sent: upstream received X-User %q", tc.trusted, tc.sent, got.Get("X-User"))
		}
	}
}

func TestProblemBodies(t *testing.T) {
	p := compile(t, func(c *policy.Config) {
		l := limit("api", "fixed_window", "2/minute")
		l.CostHeader = "X-Cost"
		c.Limits = []policy.LimitConfig{l}
		rt := route("demo", "/demo", "", "api")
		rt.Respond = &policy.RespondConfig{Status: 200, Body: "hi"}
		c.Routes = []policy.RouteConfig{rt}
	})
	var obs recorder
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: &obs})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	for _, tc := range []struct {
		path, cost string
		status     int
		retryAfter bool
	}{
		{"/nope", "", 404, false},
		{"/demo", "-1", 400, false},
		{"/demo", "1.5", 400, false},
		{"/demo", "99999999999999999999999", 400, false},
		{"/demo", "3", 429, false}, // cost above capacity: no Retry-After
		{"/demo", "2", 200, false},
		{"/demo", "1", 429, true},
	} {
		var hdr []string
		if tc.cost != "" {
			hdr = []string{"X-Cost", tc.cost}
		}
		req, _ := http.NewRequest("GET", gw.URL+tc.path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s cost %q: status %d, want %d; body %s", tc.path, tc.cost, resp.StatusCode, tc.status, body)
			continue
		}
		if (resp.Header.Get("Retry-After") != "") != tc.retryAfter {
			t.Errorf("%s cost %q: Retry-After %q, want present=%v", tc.path, tc.cost, resp.Header.Get("Retry-After"), tc.retryAfter)
		}
		if tc.status != 200 {
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%s: Content-Type %q", tc.path, ct)
			}
			var pb map[string]any
			if err := json.Unmarshal(body, &pb); err != nil || pb["status"] != float64(tc.status) {
				t.Errorf("%s: body %s is not a problem with status %d", tc.path, body, tc.status)
			}
		}
	}
	if obs.count(proxy.OutcomeBadRequest) != 3 || obs.count(proxy.OutcomeNoRoute) != 1 || obs.count(proxy.OutcomeLimited) != 2 {
		t.Errorf("outcomes: bad_request=%d no_route=%d limited=%d, want 3, 1, 2",
			obs.count(proxy.OutcomeBadRequest), obs.count(proxy.OutcomeNoRoute), obs.count(proxy.OutcomeLimited))
	}
}

// TestSwapKeepsCounters checks that an unchanged limit keeps its count
// across a policy swap and a changed one starts afresh.
func TestSwapKeepsCounters(t *testing.T) {
	up := newUpstream(t, nil)
	mk := func(rate string) *policy.Policy {
		return compile(t, func(c *policy.Config) {
			c.Limits = []policy.LimitConfig{limit("api", "fixed_window", rate)}
			c.Routes = []policy.RouteConfig{route("api", "/", up.URL, "api")}
		})
	}
	h, err := proxy.New(mk("2/minute"), proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	get(t, gw.URL+"/")
	get(t, gw.URL+"/")
	h.Swap(mk("2/minute"))
	if resp := get(t, gw.URL+"/"); resp.StatusCode != 429 {
		t.Fatalf("after swapping in the same limit: status %d, want 429 (count kept)", resp.StatusCode)
	}
	h.Swap(mk("3/minute"))
	if resp := get(t, gw.URL+"/"); resp.StatusCode != 200 {
		t.Fatalf("after changing the limit: status %d, want 200 (new key space)", resp.StatusCode)
	}
}

// TestShadowLogRateLimited checks that a shadow limit that keeps denying
// logs one line a second, not one per request, and counts the rest.
func TestShadowLogRateLimited(t *testing.T) {
	p := compile(t, func(c *policy.Config) {
		l := limit("candidate", "fixed_window", "1/hour")
		l.Mode = "shadow"
		c.Limits = []policy.LimitConfig{l}
		rt := route("demo", "/", "", "candidate")
		rt.Respond = &policy.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []policy.RouteConfig{rt}
	})
	h, log := newLogged(t, p, proxy.Options{Store: memstore.New(memstore.Options{})})
	serve := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		if w.Code != 200 {
			t.Fatalf("status %d, want 200", w.Code)
		}
	}
	serve() // allowed by the shadow limit too
	for range 10 {
		serve() // would be denied: the first one logs
		log.advance(10 * time.Millisecond)
	}
	log.advance(time.Second)
	serve() // a second later: logs again, counting the 9 in between
	lines := log.lines()
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[1], `"also_denied_since_last_line":9`) {
		t.Errorf("second line does not count the 9 suppressed denials: %s", lines[1])
	}
}

// clockedLog is a handler's JSON log and its clock, both in the test's
// hands: the clock moves only by advance.
type clockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
	now time.Time
}

func (l *clockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *clockedLog) advance(d time.Duration) { l.now = l.now.Add(d) }

// lines returns the lines logged so far.
func (l *clockedLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

// newLogged builds the handler of p with opts, logging JSON to the
// returned log and reading its clock (from 2026-01-01 UTC).
func newLogged(t *testing.T, p *policy.Policy, opts proxy.Options) (*proxy.Handler, *clockedLog) {
	t.Helper()
	log := &clockedLog{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts.Logger = slog.New(slog.NewJSONHandler(log, nil))
	opts.Now = func() time.Time { return log.now }
	h, err := proxy.New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, log
}

// TestOnMissing: a limit keyed by API key, hit by
// clients that send none.
func TestOnMissing(t *testing.T) {
	for _, tc := range []struct {
		onMissing string
		// statuses of: key A, key A, no key from IP 1, no key from IP 1,
		// no key from IP 2 (limit 1 per hour per key)
		want []int
	}{
		{"shared", []int{200, 429, 200, 429, 429}}, // one "-" bucket for every keyless request
		{"ip", []int{200, 429, 200, 429, 200}},     // one bucket per IP
		{"reject", []int{200, 429, 401, 401, 401}}, // 401, nothing counted
	} {
		t.Run(tc.onMissing, func(t *testing.T) {
			p := compile(t, func(c *policy.Config) {
				l := limit("per-key", "fixed_window", "1/hour")
				l.By, l.OnMissing = []string{"api_key"}, tc.onMissing
				c.Limits = []policy.LimitConfig{l}
				rt := route("demo", "/", "", "per-key")
				rt.Respond = &policy.RespondConfig{Status: 200, Body: "ok"}
				c.Routes = []policy.RouteConfig{rt}
			})
			h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
			if err != nil {
				t.Fatal(err)
			}
			for i, req := range []struct{ key, ip string }{
				{"A", "192.0.2.1"}, {"A", "192.0.2.1"}, {"", "192.0.2.1"}, {"", "192.0.2.1"}, {"", "192.0.2.2"},
			} {
				r := httptest.NewRequest("GET", "/x", nil)
				r.RemoteAddr = req.ip + ":1234"
				if req.key != "" {
					r.Header.Set("X-API-Key", req.key)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != tc.want[i] {
					t.Errorf("request %d (key %q, ip %s): status %d, want %d", i+1, req.key, req.ip, w.Code, tc.want[i])
				}
			}
		})
	}
}

func TestStoreErrorsLoggedOncePerSecond(t *testing.T) {
	p := compile(t, func(c *policy.Config) {
		c.Store.OnError = "allow"
		c.Limits = []policy.LimitConfig{limit("api", "fixed_window", "2/minute")}
		rt := route("demo", "/", "", "api")
		rt.Respond = &policy.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []policy.RouteConfig{rt}
	})
	h, log := newLogged(t, p, proxy.Options{Store: &failingStore{}})
	for range 5 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		log.advance(100 * time.Millisecond)
	}
	log.advance(time.Second)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	lines := log.lines()
	if len(lines) != 2 || !strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[1], `"also_failed_since_last_line":4`) {
		t.Fatalf("want 2 lines, the second counting 4 failures in between; got:\n%s", strings.Join(lines, "\n"))
	}
}

// TestNotFoundEchoBounded: a 404 names the method and path it could not
// route, each bounded to 256 bytes and "…" however long the client made
// them (net/http accepts a method token up to the header limit).
func TestNotFoundEchoBounded(t *testing.T) {
	p := compile(t, func(c *policy.Config) {
		c.Routes = []policy.RouteConfig{route("api", "/api", "http://127.0.0.1:1")}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	method := strings.Repeat("M", 10000)
	r := httptest.NewRequest("GET", "/elsewhere", nil)
	r.Method = method
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", w.Code)
	}
	want := `no route matches ` + strings.Repeat("M", 256) + `… /elsewhere`
	if body := w.Body.String(); !strings.Contains(body, want) || len(body) > 1024 {
		t.Fatalf("body (%d bytes) does not echo the method bounded to 256 bytes:\n%.600s", len(body), body)
	}
}

// TestUpstreamErrorLogThrottled: an upstream that cannot be reached fails
// every request (502 each), but the log gets one line a second, the next
// one counting the failures in between.
func TestUpstreamErrorLogThrottled(t *testing.T) {
	p := compile(t, func(c *policy.Config) {
		c.Routes = []policy.RouteConfig{route("api", "/", "http://127.0.0.1:1")}
	})
	h, log := newLogged(t, p, proxy.Options{Store: memstore.New(memstore.Options{})})
	serve := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		if w.Code != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", w.Code)
		}
	}
	for range 10 {
		serve() // the first one logs
		log.advance(10 * time.Millisecond)
	}
	log.advance(time.Second)
	serve() // a second later: logs again, counting the 9 in between
	lines := log.lines()
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[1], `"also_failed_since_last_line":9`) {
		t.Fatalf("second line does not count the 9 failures in between: %s", lines[1])
	}
}
