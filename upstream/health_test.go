package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds; the deadline is a hang guard, not a
// timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRecordThresholds walks the health state machine: unhealthy after
// UnhealthyAfter failures in a row, healthy after HealthyAfter passes in
// a row, and a flapping target that never reaches either threshold keeps
// its state.
func TestRecordThresholds(t *testing.T) {
	hc := &HealthCheck{UnhealthyAfter: 3, HealthyAfter: 2}
	fail := errors.New("down")
	for _, tc := range []struct {
		name  string
		steps string // p: pass, f: fail
		want  string // healthy after each step: h or u
	}{
		{"fails below threshold", "ff", "hh"},
		{"fails at threshold", "fff", "hhu"},
		{"pass resets the failures", "ffpff", "hhhhh"},
		{"back after healthy_after passes", "fffpp", "hhuuh"},
		{"a fail resets the passes", "fffpfpp", "hhuuuuh"},
		{"flapping stays healthy", "fpfpfpfp", "hhhhhhhh"},
		{"flapping stays unhealthy", "fffpfpfp", "hhuuuuuu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &Target{}
			for i, s := range tc.steps {
				var err error
				if s == 'f' {
					err = fail
				}
				record(tg, hc, err)
				if got := tg.Healthy(); got != (tc.want[i] == 'h') {
					t.Fatalf("step %d (%c): healthy = %v, want %c", i, s, got, tc.want[i])
				}
			}
		})
	}
}

// TestProbeHostile is the table of targets that answer a probe badly:
// each probe ends within its timeout with the outcome in the table, and
// never follows a redirect nor reads more than probeBodyLimit.
func TestProbeHostile(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var redirected atomic.Int64
	var bigWritten atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "api.example:8080" || !strings.Contains(r.UserAgent(), "Tollgate") {
			w.WriteHeader(http.StatusBadRequest) // the probe must say who it is, for whom
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/slow200", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/slowbody", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for i := 0; i < 1<<15; i++ { // up to 1 GiB, unless the reader goes
			n, err := w.Write(chunk)
			bigWritten.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	})
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	mux.HandleFunc("/404", http.NotFound)
	mux.HandleFunc("/hugeheaders", func(w http.ResponseWriter, r *http.Request) {
		for i := range 64 {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("a", 16<<10))
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	hc := &HealthCheck{Timeout: 300 * time.Millisecond, Interval: time.Second}
	u := mustURL(t, srv.URL)
	tg := &Target{URL: u, Host: "api.example:8080"}
	for _, tc := range []struct {
		path string
		pass bool
	}{
		{"/ok", true},
		{"/hang", false},
		{"/slow200", false},
		{"/slowbody", false},
		{"/huge", true},
		{"/redirect", true}, // a 3xx answers: the target is up
		{"/500", false},
		{"/404", false},
		{"/hugeheaders", false}, // 1 MiB of headers: refused, not held
	} {
		for via, send := range probers(hc) {
			t.Run(via+tc.path, func(t *testing.T) {
				h := *hc
				h.Path = tc.path
				err := send(tg, &h)
				if (err == nil) != tc.pass {
					t.Fatalf("probe %s via %s: err = %v, want pass = %v", tc.path, via, err, tc.pass)
				}
			})
		}
	}
	if n := redirected.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	// The huge body's writer stops once the probe closes the connection:
	// far less than the 1 GiB it offered was written (kernel buffers
	// take some).
	waitFor(t, "the huge body's writer to stop", func() bool {
		a := bigWritten.Load()
		time.Sleep(50 * time.Millisecond)
		return a == bigWritten.Load()
	})
	if n := bigWritten.Load(); n > 64<<20 {
		t.Errorf("the target wrote %d bytes to the probe: its body was read beyond the bound", n)
	}
}

// TestProbesKeepConnection checks that successive probes of a target
// reuse one connection (no dial, no handshake per probe): what keeps
// 1,000 targets' checks cheap.
func TestProbesKeepConnection(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	hc := &HealthCheck{Path: "/", Timeout: time.Second, Interval: time.Second}
	tg := &Target{URL: mustURL(t, srv.URL), Host: "x"}
	for via, send := range probers(hc) {
		before := conns.Load()
		for i := 0; i < 5; i++ {
			if err := send(tg, hc); err != nil {
				t.Fatal(err)
			}
		}
		if n := conns.Load() - before; n != 1 {
			t.Errorf("5 probes via %s opened %d connections, want 1", via, n)
		}
	}
}

// probers returns the two ways a plain http:// target can be probed,
// each keeping its connections across calls: net/http's transport (what
// h2c and https targets use) and the probes' own HTTP/1.1 exchange (what
// plain http targets use).
func probers(hc *HealthCheck) map[string]func(*Target, *HealthCheck) error {
	rt := newProber(hc).transport(&Target{URL: &url.URL{Scheme: "http"}})
	conns := &h1Conns{}
	return map[string]func(*Target, *HealthCheck) error{
		"transport": func(t *Target, h *HealthCheck) error { return probe(context.Background(), rt, t, h) },
		"h1":        func(t *Target, h *HealthCheck) error { return probeH1(context.Background(), conns, t, h) },
	}
}

// flipServer answers /healthz 200 or 503 as told, and counts probes.
type flipServer struct {
	*httptest.Server
	down   atomic.Bool
	probes atomic.Int64
}

func newFlipServer(t *testing.T) *flipServer {
	f := &flipServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.probes.Add(1)
		if f.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(f.Close)
	return f
}

// TestPoolHealthLoop runs a Pool's health checks against real servers: a
// target whose health check starts failing turns unhealthy, the other
// stays healthy, and the first comes back when it passes again. Stopping
// the Pool stops its probes.
func TestPoolHealthLoop(t *testing.T) {
	a, b := newFlipServer(t), newFlipServer(t)
	spec := &Spec{Targets: []TargetSpec{{URL: mustURL(t, a.URL), Weight: 1}, {URL: mustURL(t, b.URL), Weight: 1}},
		Health: &HealthCheck{Path: "/healthz", Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond,
			UnhealthyAfter: 2, HealthyAfter: 2}}
	r := NewRegistry(Options{})
	pools := r.Update(map[string]*Spec{"api": spec})
	p := pools["api"]
	ta, tb := p.Targets()[0], p.Targets()[1]
	if !ta.Healthy() || !tb.Healthy() {
		t.Fatal("targets start unhealthy; want healthy until proven otherwise")
	}
	a.down.Store(true)
	waitFor(t, "a unhealthy", func() bool { return !ta.Healthy() })
	if !tb.Healthy() || p.Healthy() != 1 {
		t.Fatalf("b healthy = %v, pool healthy = %d", tb.Healthy(), p.Healthy())
	}
	if ta.LastProbeError() == "" {
		t.Error("no last probe error on the failing target")
	}
	a.down.Store(false)
	waitFor(t, "a healthy again", func() bool { return ta.Healthy() })

	// An unchanged Spec keeps the Pool, and its state.
	a.down.Store(true)
	waitFor(t, "a unhealthy", func() bool { return !ta.Healthy() })
	if p2 := r.Update(map[string]*Spec{"api": spec})["api"]; p2 != p {
		t.Fatal("an unchanged Spec got a new Pool")
	}
	// A changed Spec (another weight for b) keeps a's Target and health.
	spec2 := *spec
	spec2.Targets = []TargetSpec{spec.Targets[0], {URL: spec.Targets[1].URL, Weight: 2}}
	p3 := r.Update(map[string]*Spec{"api": &spec2})["api"]
	if p3.Targets()[0] != ta || p3.Targets()[0].Healthy() {
		t.Fatal("a changed Spec lost the unchanged target's health")
	}
	if p3.Targets()[1] == tb {
		t.Fatal("a target whose weight changed kept its old Target")
	}
	r.Close()
	n := a.probes.Load() + b.probes.Load()
	time.Sleep(300 * time.Millisecond)
	if m := a.probes.Load() + b.probes.Load(); m != n {
		t.Errorf("%d probes after Close", m-n)
	}
}

// TestHealthCheckRemovedResets: a reload that drops a route's health
// check makes its unhealthy targets healthy (nothing would ever bring
// them back).
func TestHealthCheckRemovedResets(t *testing.T) {
	a := newFlipServer(t)
	a.down.Store(true)
	b := newFlipServer(t)
	targets := []TargetSpec{{URL: mustURL(t, a.URL), Weight: 1}, {URL: mustURL(t, b.URL), Weight: 1}}
	spec := &Spec{Targets: targets, Health: &HealthCheck{Path: "/", Interval: 100 * time.Millisecond,
		Timeout: 100 * time.Millisecond, UnhealthyAfter: 1, HealthyAfter: 1}}
	r := NewRegistry(Options{})
	defer r.Close()
	ta := r.Update(map[string]*Spec{"api": spec})["api"].Targets()[0]
	waitFor(t, "a unhealthy", func() bool { return !ta.Healthy() })
	p := r.Update(map[string]*Spec{"api": {Targets: targets}})["api"]
	if p.Targets()[0] != ta || !ta.Healthy() {
		t.Fatalf("health check removed: target kept = %v, healthy = %v", p.Targets()[0] == ta, ta.Healthy())
	}
}

// TestInertRegistryProbesNothing: an inert Registry (replay, tests)
// neither probes nor resolves.
func TestInertRegistryProbesNothing(t *testing.T) {
	a := newFlipServer(t)
	spec := &Spec{Targets: []TargetSpec{{URL: mustURL(t, a.URL), Weight: 1}, {URL: mustURL(t, "http://name.invalid:80"), Weight: 1}},
		Health: &HealthCheck{Path: "/", Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, UnhealthyAfter: 1, HealthyAfter: 1}}
	res := &fakeResolver{}
	r := NewRegistry(Options{Inert: true, Resolver: res})
	p := r.Update(map[string]*Spec{"api": spec})["api"]
	time.Sleep(300 * time.Millisecond)
	r.Close()
	if a.probes.Load() != 0 || res.calls.Load() != 0 || len(p.Targets()) != 2 {
		t.Errorf("inert registry: %d probes, %d lookups, %d targets", a.probes.Load(), res.calls.Load(), len(p.Targets()))
	}
}

// TestProbeH2C probes an h2c:// target over cleartext HTTP/2 with prior
// knowledge: a server that speaks only HTTP/2 there answers the probe.
func TestProbeH2C(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	defer srv.Close()
	hc := &HealthCheck{Path: "/healthz", Timeout: time.Second, Interval: time.Second}
	tg := &Target{URL: mustURL(t, srv.URL), Host: "grpc.internal", H2C: true}
	if err := probe(context.Background(), newProber(hc).transport(tg), tg, hc); err != nil {
		t.Fatalf("h2c probe: %v", err)
	}
	plain := &Target{URL: tg.URL, Host: "grpc.internal"}
	if err := probe(context.Background(), newProber(hc).transport(plain), plain, hc); err == nil {
		t.Fatal("the HTTP/1.1 probe passed too: the server does not tell the protocols apart")
	}
}

// TestProbeHTTPSServerName probes an https target addressed by IP whose
// configured host is a name: the certificate is checked against the name
// (the TLS server name), not the address, and a name it is not valid for
// fails the probe.
func TestProbeHTTPSServerName(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.TLS.ServerName != "example.com" {
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate()) // valid for example.com and 127.0.0.1
	hc := &HealthCheck{Path: "/healthz", Timeout: time.Second, Interval: time.Second}
	for _, tc := range []struct {
		name string
		pass bool
	}{{"example.com", true}, {"other.example", false}} {
		pr := newProber(hc)
		pr.roots = roots
		tg := &Target{URL: mustURL(t, srv.URL), Host: tc.name + ":443", ServerName: tc.name}
		if err := probe(context.Background(), pr.transport(tg), tg, hc); (err == nil) != tc.pass {
			t.Errorf("server name %s: err = %v, want pass = %v", tc.name, err, tc.pass)
		}
	}
}

// TestProbeH1Connections: the plain-HTTP probe's kept connection, closed
// by the target while idle, is replaced without failing the probe; an
// answer with "Connection: close" is not reused; a stopped Pool closes
// the connections it kept.
func TestProbeH1Connections(t *testing.T) {
	var opened, closed atomic.Int64
	var closeIt atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closeIt.Load() {
			w.Header().Set("Connection", "close")
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	hc := &HealthCheck{Path: "/", Timeout: time.Second, Interval: time.Second, UnhealthyAfter: 1, HealthyAfter: 1}
	tg := &Target{URL: mustURL(t, srv.URL), Host: "x"}
	conns := &h1Conns{}
	send := func() error { return probeH1(context.Background(), conns, tg, hc) }
	if err := send(); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections() // the target drops the idle connection
	waitFor(t, "the server to see the close", func() bool { return closed.Load() == 1 })
	if err := send(); err != nil {
		t.Fatalf("probe after the target closed the idle connection: %v", err)
	}
	if opened.Load() != 2 {
		t.Fatalf("%d connections, want 2", opened.Load())
	}
	closeIt.Store(true)
	if err := send(); err != nil {
		t.Fatal(err)
	}
	closeIt.Store(false)
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if opened.Load() != 3 {
		t.Fatalf("%d connections after a Connection: close answer, want 3", opened.Load())
	}

	conns.prune(nil)
	waitFor(t, "the test's connection closed", func() bool { return closed.Load() == 3 })

	// A Pool's kept connections close when it stops.
	r := NewRegistry(Options{})
	r.Update(map[string]*Spec{"api": {Targets: []TargetSpec{{URL: tg.URL, Weight: 1}, {URL: mustURL(t, "http://192.0.2.1:1"), Weight: 1}},
		Health: &HealthCheck{Path: "/", Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, UnhealthyAfter: 1, HealthyAfter: 1}}})
	before := opened.Load()
	waitFor(t, "the pool's probe connection", func() bool { return opened.Load() > before })
	r.Close()
	waitFor(t, "every connection closed", func() bool { return closed.Load() == opened.Load() })
}
