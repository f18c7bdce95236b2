package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// healthTarget is an upstream whose /healthz answers 200 or 503 as the
// test says, and that counts the other requests it serves (with the Host
// they carried).
type healthTarget struct {
	*httptest.Server
	down   atomic.Bool
	probes atomic.Int64
	served atomic.Int64
	mu     sync.Mutex
	hosts  []string
	// probeHosts are the health probes' Host and User-Agent.
	probeHosts []string
}

func newHealthTarget(t *testing.T, ln net.Listener) *healthTarget {
	h := &healthTarget{}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			h.probes.Add(1)
			h.mu.Lock()
			h.probeHosts = append(h.probeHosts, r.Host+" "+r.UserAgent())
			h.mu.Unlock()
			if h.down.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
			return
		}
		h.served.Add(1)
		h.mu.Lock()
		h.hosts = append(h.hosts, r.Host)
		h.mu.Unlock()
		fmt.Fprint(w, h.Listener.Addr().String())
	}))
	if ln != nil {
		h.Listener.Close()
		h.Listener = ln
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

// upstreamsBody is the JSON of GET /admin/upstreams.
type upstreamsBody struct {
	Routes []struct {
		Route   string `json:"route"`
		Healthy int    `json:"healthy"`
		Targets []struct {
			Target       string `json:"target"`
			Address      string `json:"address"`
			Healthy      bool   `json:"healthy"`
			LastError    string `json:"last_error"`
			ChecksPassed uint64 `json:"checks_passed"`
			ChecksFailed uint64 `json:"checks_failed"`
		} `json:"targets"`
		Names []struct {
			Target    string   `json:"target"`
			Addresses []string `json:"addresses"`
			Failures  uint64   `json:"resolve_failures"`
		} `json:"names"`
	} `json:"routes"`
}

func adminUpstreams(t *testing.T, g *gw) *upstreamsBody {
	t.Helper()
	r := adminDo(t, g, "GET", "/admin/upstreams", "")
	if r.Status != 200 {
		t.Fatalf("GET /admin/upstreams: %s", r)
	}
	var b upstreamsBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("GET /admin/upstreams: %v: %s", err, r.Body)
	}
	return &b
}

// targetHealth returns the health of the api route's targets by address.
func targetHealth(t *testing.T, g *gw) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range adminUpstreams(t, g).Routes {
		if r.Route == "api" {
			for _, tg := range r.Targets {
				out[tg.Address] = tg.Healthy
			}
		}
	}
	return out
}

// eventually polls cond until it holds; the deadline is a hang guard.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// balanced sends n requests through g and reports whether more than one
// of targets served them: whether the proxy forwards over the route's
// Pool.
func balanced(t *testing.T, g *gw, n int, targets ...*healthTarget) bool {
	t.Helper()
	before := make([]int64, len(targets))
	for i, h := range targets {
		before[i] = h.served.Load()
	}
	c := &http.Client{Timeout: 5 * time.Second}
	for range n {
		get(t, c, g.url("/x"), nil)
	}
	k := 0
	for i, h := range targets {
		if h.served.Load() > before[i] {
			k++
		}
	}
	return k > 1
}

// servedBy sends n requests and returns how many each target served.
func servedBy(t *testing.T, g *gw, n int, targets ...*healthTarget) []int64 {
	t.Helper()
	before := make([]int64, len(targets))
	for i, h := range targets {
		before[i] = h.served.Load()
	}
	c := &http.Client{Timeout: 5 * time.Second}
	for range n {
		if r := get(t, c, g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("GET /x: %s", r)
		}
	}
	out := make([]int64, len(targets))
	for i, h := range targets {
		out[i] = h.served.Load() - before[i]
	}
	return out
}

// TestUpstreamHealthChecks runs a route over two real targets with an
// active health check: a target whose /healthz starts failing turns
// unhealthy in /admin/upstreams and /metrics and gets no traffic; /readyz
// stays ready while one target is healthy, goes unready (naming the route
// and its targets) when none is, and ready again when they pass.
func TestUpstreamHealthChecks(t *testing.T) {
	t.Parallel()
	a, b := newHealthTarget(t, nil), newHealthTarget(t, nil)
	route := fmt.Sprintf(`upstreams = ["%s", "%s"]
health_check = { path = "/healthz", interval = "200ms", timeout = "200ms", unhealthy_after = 2, healthy_after = 2 }`, a.URL, b.URL)
	g := startGateway(t, "upstreams.toml.tmpl", gwOpts{Data: map[string]any{"Server": "", "Route": route}})
	aAddr, bAddr := a.Listener.Addr().String(), b.Listener.Addr().String()

	eventually(t, "both targets probed", func() bool { return a.probes.Load() > 0 && b.probes.Load() > 0 })
	if h := targetHealth(t, g); !h[aAddr] || !h[bAddr] {
		t.Fatalf("health at start %v", h)
	}
	if rd := readyz(t, g); !rd.Ready {
		t.Fatalf("/readyz at start: %+v", rd)
	}
	if !balanced(t, g, 20, a, b) {
		t.Fatalf("20 requests with both targets healthy did not reach both")
	}

	a.down.Store(true)
	eventually(t, "a unhealthy", func() bool { h := targetHealth(t, g); return !h[aAddr] && h[bAddr] })
	m := scrape(t, g, "")
	checkFamily(t, m, "tollgate_upstream_healthy", map[string]float64{
		fmt.Sprintf(`tollgate_upstream_healthy{address=%q,route="api",target=%q}`, aAddr, a.URL): 0,
		fmt.Sprintf(`tollgate_upstream_healthy{address=%q,route="api",target=%q}`, bAddr, b.URL): 1,
	})
	if f := m.family("tollgate_upstream_health_checks_total", `result="fail"`, "address=\""+aAddr+"\""); len(f) != 1 {
		t.Errorf("no failed health checks of a in /metrics:%s", f)
	}
	if rd := readyz(t, g); !rd.Ready {
		t.Fatalf("/readyz with one healthy target: %+v", rd)
	}
	if got := servedBy(t, g, 20, a, b); got[0] != 0 || got[1] != 20 {
		t.Errorf("with a unhealthy, a served %d and b %d of 20", got[0], got[1])
	}

	b.down.Store(true)
	eventually(t, "b unhealthy", func() bool { return !targetHealth(t, g)[bAddr] })
	r := adminDo(t, g, "GET", "/readyz", "")
	var rd struct {
		Ready           bool   `json:"ready"`
		Upstreams       string `json:"upstreams"`
		UnhealthyRoutes []struct {
			Route   string `json:"route"`
			Targets []struct {
				Target    string `json:"target"`
				LastError string `json:"last_error"`
			} `json:"targets"`
		} `json:"unhealthy_routes"`
	}
	if err := json.Unmarshal(r.Body, &rd); err != nil {
		t.Fatal(err)
	}
	if r.Status != 503 || rd.Ready || rd.Upstreams != "unhealthy" || len(rd.UnhealthyRoutes) != 1 ||
		rd.UnhealthyRoutes[0].Route != "api" || len(rd.UnhealthyRoutes[0].Targets) != 2 ||
		!strings.Contains(rd.UnhealthyRoutes[0].Targets[0].LastError, "503") {
		t.Fatalf("/readyz with no healthy target: %s", r)
	}

	a.down.Store(false)
	b.down.Store(false)
	eventually(t, "both healthy again", func() bool { h := targetHealth(t, g); return h[aAddr] && h[bAddr] })
	if rd := readyz(t, g); !rd.Ready {
		t.Fatalf("/readyz after recovery: %+v", rd)
	}
	if got := servedBy(t, g, 20, a, b); got[0] == 0 || got[1] == 0 {
		t.Errorf("after recovery, a served %d and b %d of 20", got[0], got[1])
	}
	// A reload that changes the health check (a longer interval) makes a
	// new Pool; the targets it lists again keep their health: a keeps
	// being unhealthy, not healthy again for the new interval.
	a.down.Store(true)
	eventually(t, "a unhealthy again", func() bool { return !targetHealth(t, g)[aAddr] })
	before := time.Now()
	g.rewrite(t, map[string]any{"Route": strings.Replace(route, `interval = "200ms"`, `interval = "30s"`, 1)})
	g.signal(t, syscall.SIGHUP)
	if rl := waitReload(t, g, before); !rl.LastReload.OK {
		t.Fatalf("reload: %+v", rl.LastReload)
	}
	if h := targetHealth(t, g); h[aAddr] || !h[bAddr] {
		t.Fatalf("after a reload that changed the health check, health %v; want a unhealthy, b healthy", h)
	}
	for _, h := range []*healthTarget{a, b} {
		h.mu.Lock()
		for _, host := range h.hosts {
			if host != strings.TrimPrefix(h.URL, "http://") {
				t.Errorf("a request reached %s with Host %q", h.URL, host)
			}
		}
		h.mu.Unlock()
	}
}

// dnsServer is a DNS server on UDP loopback that answers A queries for
// one name with the addresses the test sets, SERVFAIL when told, and
// nothing at all once closed.
type dnsServer struct {
	conn    net.PacketConn
	name    dnsmessage.Name
	mu      sync.Mutex
	addrs   []string
	fail    bool
	queries atomic.Int64
}

func startDNS(t *testing.T, name string) *dnsServer {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: pc, name: dnsmessage.MustNewName(name)}
	t.Cleanup(func() { pc.Close() })
	go s.serve()
	return s
}

func (s *dnsServer) set(fail bool, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.addrs = fail, addrs
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		s.queries.Add(1)
		s.mu.Lock()
		fail, addrs := s.fail, s.addrs
		s.mu.Unlock()
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
		switch {
		case fail:
			rh.RCode = dnsmessage.RCodeServerFailure
		case q.Name.String() != s.name.String():
			rh.RCode = dnsmessage.RCodeNameError
		}
		bld := dnsmessage.NewBuilder(nil, rh)
		bld.EnableCompression()
		_ = bld.StartQuestions()
		_ = bld.Question(q)
		_ = bld.StartAnswers()
		if rh.RCode == dnsmessage.RCodeSuccess && q.Type == dnsmessage.TypeA {
			for _, a := range addrs {
				ip := net.ParseIP(a).To4()
				_ = bld.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
					dnsmessage.AResource{A: [4]byte(ip)})
			}
		}
		msg, err := bld.Finish()
		if err == nil {
			_, _ = s.conn.WriteTo(msg, from)
		}
	}
}

// TestUpstreamDNS runs a route whose target is a DNS name, resolved by a
// DNS server of the test's own (server.resolver): the name's addresses
// become the route's targets and follow a changed answer; a resolver that
// fails, then one that is gone, keep the last addresses; requests carry
// the configured name as Host.
func TestUpstreamDNS(t *testing.T) {
	t.Parallel()
	// Two targets on one port at two loopback addresses: what one name
	// resolving to two hosts looks like.
	lnA, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 loopback: %v", err)
	}
	port := lnA.Addr().(*net.TCPAddr).Port
	lnB, err := net.Listen("tcp", fmt.Sprintf("127.0.0.3:%d", port))
	if err != nil {
		t.Skipf("127.0.0.3:%d: %v", port, err)
	}
	a, b := newHealthTarget(t, lnA), newHealthTarget(t, lnB)
	dns := startDNS(t, "svc.tollgate.test.")
	dns.set(false, "127.0.0.2")
	name := fmt.Sprintf("http://svc.tollgate.test:%d", port)
	route := fmt.Sprintf(`upstreams = ["%s"]
resolve_interval = "1s"
health_check = { path = "/healthz", interval = "1s", timeout = "500ms" }`, name)
	g := startGateway(t, "upstreams.toml.tmpl", gwOpts{Data: map[string]any{
		"Server": fmt.Sprintf("resolver = %q", dns.conn.LocalAddr().String()), "Route": route}})

	addrs := func() []string {
		var out []string
		for _, r := range adminUpstreams(t, g).Routes {
			for _, tg := range r.Targets {
				out = append(out, tg.Address)
			}
		}
		return out
	}
	aAddr, bAddr := lnA.Addr().String(), lnB.Addr().String()
	if got := addrs(); len(got) != 1 || got[0] != aAddr {
		t.Fatalf("targets at start %v, want [%s] (resolved before the gateway serves)", got, aAddr)
	}
	eventually(t, "a probed", func() bool { return a.probes.Load() > 0 })
	c := &http.Client{Timeout: 5 * time.Second}
	if r := get(t, c, g.url("/x"), nil); r.Status != 200 || a.served.Load() != 1 {
		t.Fatalf("a request to the name's one address: %s; a served %d", r, a.served.Load())
	}

	dns.set(false, "127.0.0.3")
	eventually(t, "the new address", func() bool { got := addrs(); return len(got) == 1 && got[0] == bAddr })
	eventually(t, "b probed", func() bool { return b.probes.Load() > 0 })
	if got := servedBy(t, g, 10, a, b); got[0] != 0 || got[1] != 10 {
		t.Errorf("after the answer changed, a served %d and b %d of 10", got[0], got[1])
	}

	dns.set(false, "127.0.0.2", "127.0.0.3")
	eventually(t, "both addresses", func() bool { return len(addrs()) == 2 })

	// The resolver fails, then is gone: the addresses stay.
	dns.set(true)
	failures := func() uint64 {
		for _, r := range adminUpstreams(t, g).Routes {
			for _, n := range r.Names {
				return n.Failures
			}
		}
		return 0
	}
	eventually(t, "a failed lookup", func() bool { return failures() >= 2 })
	dns.conn.Close()
	f := failures()
	eventually(t, "a lookup with no resolver", func() bool { return failures() > f })
	if got := addrs(); len(got) != 2 || got[0] != aAddr || got[1] != bAddr {
		t.Fatalf("after resolution failed, targets %v; want the last good [%s %s]", got, aAddr, bAddr)
	}
	if m := scrape(t, g, "").family("tollgate_upstream_resolve_failures_total", `route="api"`); len(m) != 1 {
		t.Errorf("resolve failures in /metrics:%s", m)
	}
	if got := servedBy(t, g, 10, a, b); got[0]+got[1] != 10 {
		t.Errorf("with the resolver down, a served %d and b %d of 10", got[0], got[1])
	}
	for _, h := range []*healthTarget{a, b} {
		h.mu.Lock()
		for _, host := range h.hosts {
			if host != strings.TrimPrefix(name, "http://") {
				t.Errorf("a request reached %s with Host %q, want the configured name", h.URL, host)
			}
		}
		for _, p := range h.probeHosts {
			if want := strings.TrimPrefix(name, "http://") + " Tollgate-HealthCheck/1"; p != want {
				t.Errorf("a probe reached %s as %q, want %q", h.URL, p, want)
			}
		}
		h.mu.Unlock()
	}
}

// TestDashboardUpstreams drives the dashboard in headless Chromium: its
// Upstreams table lists the route's targets with their health, and
// follows a target that turns unhealthy and back.
func TestDashboardUpstreams(t *testing.T) {
	t.Parallel()
	a, b := newHealthTarget(t, nil), newHealthTarget(t, nil)
	route := fmt.Sprintf(`upstreams = ["%s", "%s"]
health_check = { path = "/healthz", interval = "1s", timeout = "1s", unhealthy_after = 2, healthy_after = 1 }`, a.URL, b.URL)
	// A second's timeout and two failed probes: b, which never fails,
	// must not be judged down by a probe the loaded machine (a browser
	// beside the race detector) answered late; a's state still shows
	// within the page's 15 s.
	g := startGateway(t, "upstreams.toml.tmpl", gwOpts{Data: map[string]any{"Server": "", "Route": route}})
	br := startBrowser(t)
	br.navigate(g.adminURL("/admin/ui"))
	aAddr := a.Listener.Addr().String()
	cell := `(document.querySelector('#upstreams tr[data-route="api"][data-address="` + aAddr + `"] td.health') || {}).textContent`
	waitFor(t, br, `document.querySelectorAll('#upstreams tr[data-route="api"]').length === 2`, "two targets of api")
	waitFor(t, br, cell+` === "healthy"`, "a healthy")
	a.down.Store(true)
	waitFor(t, br, cell+` === "unhealthy"`, "a unhealthy")
	var other string
	br.eval(`document.querySelector('#upstreams tr[data-route="api"][data-address="`+b.Listener.Addr().String()+`"] td.health').textContent`, &other)
	if other != "healthy" {
		t.Errorf("b shows %q while a is down", other)
	}
	a.down.Store(false)
	waitFor(t, br, cell+` === "healthy"`, "a healthy again")
}

// TestUpstreamHealthHostile runs one route over targets whose health
// checks answer badly, through the binary: each ends in the state the
// hostile-inputs table gives it, and the gateway keeps serving its admin
// listener meanwhile.
func TestUpstreamHealthHostile(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	hang := func(r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}
	rows := []struct {
		name    string
		healthy bool
		handler http.HandlerFunc
	}{
		{"hangs", false, func(w http.ResponseWriter, r *http.Request) { hang(r) }},
		{"200 too slowly", false, func(w http.ResponseWriter, r *http.Request) { hang(r); w.WriteHeader(200) }},
		{"body stalls", false, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			hang(r)
		}},
		{"1 GiB body", true, func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 32<<10)
			for range 1 << 15 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}},
		{"1 MiB of headers", false, func(w http.ResponseWriter, r *http.Request) {
			for i := range 64 {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("a", 16<<10))
			}
		}},
		{"redirect", true, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				w.WriteHeader(500) // the redirect was followed
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}},
		{"500", false, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }},
	}
	var urls []string
	byAddr := map[string]string{}
	for _, row := range rows {
		s := httptest.NewServer(row.handler)
		t.Cleanup(s.Close)
		urls = append(urls, fmt.Sprintf("%q", s.URL))
		byAddr[s.Listener.Addr().String()] = row.name
	}
	route := fmt.Sprintf(`upstreams = [%s]
health_check = { path = "/healthz", interval = "300ms", timeout = "200ms", unhealthy_after = 1, healthy_after = 1 }`, strings.Join(urls, ", "))
	g := startGateway(t, "upstreams.toml.tmpl", gwOpts{Data: map[string]any{"Server": "", "Route": route}})
	want := func() (bool, string) {
		var diff []string
		for _, r := range adminUpstreams(t, g).Routes {
			for _, tg := range r.Targets {
				name := byAddr[tg.Address]
				for _, row := range rows {
					if row.name == name && (row.healthy != tg.Healthy || tg.ChecksPassed+tg.ChecksFailed < 3) {
						diff = append(diff, fmt.Sprintf("%s: healthy %v after %d probes", name, tg.Healthy, tg.ChecksPassed+tg.ChecksFailed))
					}
				}
			}
		}
		return len(diff) == 0, strings.Join(diff, "; ")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, diff := want()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the targets did not reach their defined states: %s", diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestUpstreamDNSUnusableAddresses: whoever answers for a target's name
// (its zone's owner, a spoofed or rebound answer) must not point the
// gateway at itself or at the cloud metadata service. An answer's
// 0.0.0.0 (a connection to which reaches the gateway's own host: here a
// "secret" service on 127.0.0.1), link-local 169.254.169.254 and
// multicast addresses are dropped; an answer of nothing else is an
// answer with no address (the last good addresses stay, a failure is
// counted), and the secret service receives nothing.
func TestUpstreamDNSUnusableAddresses(t *testing.T) {
	t.Parallel()
	lnA, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 loopback: %v", err)
	}
	port := lnA.Addr().(*net.TCPAddr).Port
	lnSecret, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Skipf("127.0.0.1:%d: %v", port, err)
	}
	a, secret := newHealthTarget(t, lnA), newHealthTarget(t, lnSecret)
	dns := startDNS(t, "svc.tollgate.test.")
	dns.set(false, "0.0.0.0", "169.254.169.254", "224.0.0.1", "255.255.255.255", "127.0.0.2")
	route := fmt.Sprintf(`upstreams = ["http://svc.tollgate.test:%d"]
retries = 1
timeout = "2s"
resolve_interval = "1s"`, port)
	g := startGateway(t, "upstreams.toml.tmpl", gwOpts{Data: map[string]any{
		"Server": fmt.Sprintf("resolver = %q", dns.conn.LocalAddr().String()), "Route": route}})
	var failures uint64
	addrs := func() []string {
		var out []string
		for _, r := range adminUpstreams(t, g).Routes {
			for _, tg := range r.Targets {
				out = append(out, tg.Address)
			}
			for _, n := range r.Names {
				failures = n.Failures
			}
		}
		return out
	}
	aAddr := lnA.Addr().String()
	if got := addrs(); len(got) != 1 || got[0] != aAddr {
		t.Fatalf("targets %v, want only [%s]: an answer's 0.0.0.0, link-local, multicast and broadcast addresses are dropped", got, aAddr)
	}
	if got := servedBy(t, g, 10, a, secret); got[0] != 10 || got[1] != 0 {
		t.Fatalf("10 GETs: the name's address served %d, the service on 127.0.0.1 %d; want 10, 0", got[0], got[1])
	}

	// An answer of nothing but 0.0.0.0: no usable address.
	dns.set(false, "0.0.0.0")
	eventually(t, "a lookup failure for an answer of 0.0.0.0", func() bool { addrs(); return failures > 0 })
	if got := addrs(); len(got) != 1 || got[0] != aAddr {
		t.Fatalf("after an answer of 0.0.0.0, targets %v; want the last good [%s]", got, aAddr)
	}
	if got := servedBy(t, g, 10, a, secret); got[0] != 10 || got[1] != 0 {
		t.Fatalf("10 GETs after an answer of 0.0.0.0: the name's address served %d, the service on 127.0.0.1 %d; want 10, 0", got[0], got[1])
	}
}

// TestUpstreamHealthPathRefused: a health_check.path the probes could
// not send as written is refused by validate, naming the key: a control
// byte or a DEL (the plain-HTTP probe writes the path into its request
// line as it is, and a target answers 400 to every probe, taking every
// target out of service). A query string, percent-encoding and UTF-8
// pass.
func TestUpstreamHealthPathRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, tc := range []struct {
		path string // TOML basic string contents
		ok   bool
	}{
		{`/healthz?full=1`, true},
		{`/health%20z`, true},
		{`/h\u0001`, false},
		{`/h\u007f`, false},
		{`/h\u000b`, false},
		{`/h\u00e9`, true},
		{`/h\tz`, false},
	} {
		cfg := filepath.Join(dir, fmt.Sprintf("c%d.toml", i))
		body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
upstreams = ["http://127.0.0.1:1", "http://127.0.0.1:2"]
health_check = { path = "%s" }
`, tc.path)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runGateway(t, nil, "validate", "--config", cfg)
		if tc.ok && code != 0 {
			t.Errorf("path %s: validate exited %d: %s", tc.path, code, stderr)
		}
		if !tc.ok && (code != 2 || !strings.Contains(stderr, "health_check.path")) {
			t.Errorf("path %s: validate exited %d, want 2 naming health_check.path: %s", tc.path, code, stderr)
		}
	}
}
