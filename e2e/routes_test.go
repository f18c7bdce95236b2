package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func startRoutes(t *testing.T) (*gw, *upstream) {
	t.Helper()
	up := newUpstream(t)
	g := startGateway(t, "routes.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL, "Down": closedAddr(t)}})
	return g, up
}

// TestPathRespellings: once a route's bucket is empty,
// respellings of its path are denied from the same bucket (or, for
// spellings the router does not match, answered 404); none opens a second
// bucket.
func TestPathRespellings(t *testing.T) {
	t.Parallel()
	g, up := startRoutes(t)
	c := newClient(t, "")
	for i := 0; i < 3; i++ {
		if r := get(t, c, g.url("/api/items"), nil); r.Status != 200 {
			t.Fatalf("request %d: %s", i+1, r)
		}
	}
	for _, tc := range []struct {
		path     string
		allow404 bool
	}{
		{"/api/items", false},
		{"/api/items/", false},
		{"//api/items", false},
		{"/api//items", false},
		{"/api/./items", false},
		{"/api/items/./", false},
		{"/api/items?x=1", false},
		{"/api/items/42", false},
		{"/api/x/../items", true},
		{"/api%2Fitems", true},
		{"/API/items", true},
		{"/api/%69tems", true},
	} {
		r := get(t, c, g.url(tc.path), nil)
		switch {
		case r.Status == http.StatusTooManyRequests:
			check429Body(t, r, "items")
		case r.Status == http.StatusNotFound && tc.allow404:
			r.problem(t, http.StatusNotFound)
		default:
			t.Errorf("GET %s after the route's bucket was emptied: got %s, want 429 from the same bucket", tc.path, r)
		}
	}
	if n := up.count(); n != 3 {
		t.Errorf("upstream received %d requests, want 3", n)
	}
}

// TestNotFound: unknown routes, a method the route does not
// take, and the admin, metrics and debug endpoints on the public listener
// are 404 problem bodies.
func TestNotFound(t *testing.T) {
	t.Parallel()
	g, up := startRoutes(t)
	c := newClient(t, "")
	for _, tc := range []struct{ method, path string }{
		{"GET", "/nope"},
		{"GET", "/"},
		{"GET", "/apiitems"},
		{"GET", "/metrics"},
		{"GET", "/admin/config"},
		{"GET", "/admin/limits?limit=items&key=x"},
		{"DELETE", "/admin/limits?limit=items&key=x"},
		{"POST", "/admin/reload"},
		{"GET", "/debug/pprof/"},
		{"GET", "/debug/pprof/goroutine?debug=2"},
		{"GET", "/readyz"},
		{"POST", "/getonly"},
	} {
		r := do(t, c, tc.method, g.url(tc.path), nil)
		if r.Status != http.StatusNotFound {
			t.Errorf("%s %s on the public listener: got %s, want 404", tc.method, tc.path, r)
			continue
		}
		r.problem(t, http.StatusNotFound)
		if strings.Contains(string(r.Body), "goroutine profile") || strings.Contains(string(r.Body), "runtime.") {
			t.Errorf("%s %s leaked debug output: %s", tc.method, tc.path, r.Body)
		}
	}
	if r := get(t, c, g.url("/getonly"), nil); r.Status != 200 || string(r.Body) != "got" {
		t.Errorf("GET /getonly: %s", r)
	}
	if n := up.count(); n != 0 {
		t.Errorf("upstream received %d requests, want 0", n)
	}
}

// TestAdminHealth: /healthz and /readyz on the admin listener.
func TestAdminHealth(t *testing.T) {
	t.Parallel()
	g, _ := startRoutes(t)
	c := newClient(t, "")
	r := get(t, c, g.adminURL("/healthz"), nil)
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != "ok" {
		t.Errorf("/healthz: %s", r)
	}
	rd := readyz(t, g)
	if !rd.Ready || rd.Draining || rd.Store != "ok" || rd.LastReload == nil || !rd.LastReload.OK {
		t.Errorf("/readyz of a healthy gateway: %+v", rd)
	}
	// The "tollgate listening" log line names both listeners.
	found := false
	for _, line := range strings.Split(g.output(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "tollgate listening" {
			continue
		}
		found = true
		if m["listen"] != g.Listen || m["admin_listen"] != g.Admin {
			t.Errorf("listening log line %s, want listen %s admin_listen %s", line, g.Listen, g.Admin)
		}
	}
	if !found {
		t.Errorf("no JSON log line with msg \"tollgate listening\"")
	}
}

// readyzBody is GET /readyz's JSON.
type readyzBody struct {
	Ready      bool   `json:"ready"`
	Draining   bool   `json:"draining"`
	Store      string `json:"store"`
	StoreError string `json:"store_error"`
	LastReload *struct {
		At    time.Time `json:"at"`
		OK    bool      `json:"ok"`
		Error string    `json:"error"`
	} `json:"last_reload"`
	JWKS *struct {
		Keys        int       `json:"keys"`
		LastSuccess time.Time `json:"last_success"`
		Error       string    `json:"error"`
	} `json:"jwks"`
	status int
}

func readyz(t testing.TB, g *gw) *readyzBody {
	t.Helper()
	r, err := tryDo(&http.Client{Timeout: 5 * time.Second}, "GET", g.adminURL("/readyz"), nil, nil)
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	var b readyzBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("/readyz body: %v: %s", err, r)
	}
	b.status = r.Status
	if (r.Status == 200) != b.Ready || (r.Status != 200 && r.Status != 503) {
		t.Errorf("/readyz status %d with ready=%v", r.Status, b.Ready)
	}
	return &b
}

// TestUpstreamFailures: an unreachable upstream is a 502, a
// slow one past the route timeout a 504, a reset connection a 502, all
// with problem bodies and no Retry-After; the admitted requests stay
// counted (limit 2/minute per route).
func TestUpstreamFailures(t *testing.T) {
	t.Parallel()
	g, up := startRoutes(t)
	c := newClient(t, "")
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		status     int
	}{
		{"down", "/down", nil, http.StatusBadGateway},
		{"slow", "/slow", map[string]string{hSleep: "10s"}, http.StatusGatewayTimeout},
		{"reset", "/reset", map[string]string{hReset: "1"}, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 2; i++ {
				start := time.Now()
				r := get(t, c, g.url(tc.path), tc.hdr)
				r.problem(t, tc.status)
				if _, ok := r.retryAfter(t); ok {
					t.Errorf("%d carries Retry-After (only rate-limit responses do)", tc.status)
				}
				if d := time.Since(start); d > 8*time.Second {
					t.Errorf("%s took %v with a 300ms route timeout", tc.path, d)
				}
			}
			r := get(t, c, g.url(tc.path), tc.hdr)
			check429Body(t, r, "counted")
		})
	}
	// The slow route's upstream requests were cancelled at the timeout.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		for _, s := range up.all() {
			if s.Path == "/slow" && s.Cancelled {
				n++
			}
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of 2 timed-out upstream requests were cancelled", n)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRespondRoutes: respond routes answer by themselves.
func TestRespondRoutes(t *testing.T) {
	t.Parallel()
	g, up := startRoutes(t)
	c := newClient(t, "")
	r := get(t, c, g.url("/demo"), nil)
	if r.Status != 200 || string(r.Body) != "hello from tollgate\n" {
		t.Errorf("/demo: %s", r)
	}
	r = get(t, c, g.url("/teapot/x"), nil)
	if r.Status != 418 || string(r.Body) != "short and stout" || r.Header.Get("Content-Type") != "text/x-tea" {
		t.Errorf("/teapot: %s", r)
	}
	if n := up.count(); n != 0 {
		t.Errorf("respond routes reached the upstream %d times", n)
	}
}

// TestStripPrefix: strip_prefix removes the route's prefix; without it the
// path is forwarded as is; the upstream's own status codes pass through.
func TestStripPrefix(t *testing.T) {
	t.Parallel()
	g, _ := startRoutes(t)
	c := newClient(t, "")
	for _, tc := range []struct{ in, path, query string }{
		{"/svc/x/y?q=1&r=2", "/x/y", "q=1&r=2"},
		{"/svc", "/", ""},
		{"/svc/", "/", ""},
		{"/keep/x/y?q=1", "/keep/x/y", "q=1"},
	} {
		r := get(t, c, g.url(tc.in), nil)
		if r.Status != 200 {
			t.Errorf("GET %s: %s", tc.in, r)
			continue
		}
		s := r.echo(t)
		if s.Path != tc.path || s.RawQuery != tc.query {
			t.Errorf("GET %s: upstream saw %q ? %q, want %q ? %q", tc.in, s.Path, s.RawQuery, tc.path, tc.query)
		}
	}
	r := get(t, c, g.url("/keep/err"), map[string]string{hStatus: "503"})
	if r.Status != 503 || r.Header.Get("X-Upstream") != "echo" {
		t.Errorf("an upstream 503 was not passed through: %s", r)
	}
}

// TestHugeHeader: a 100 KiB header is answered 431 by the
// server limit; the gateway keeps serving.
func TestHugeHeader(t *testing.T) {
	t.Parallel()
	g, _ := startRoutes(t)
	c := newClient(t, "")
	big := strings.Repeat("k", 100<<10)
	for _, h := range []string{"X-API-Key", "Authorization"} {
		r, err := tryDo(c, "GET", g.url("/demo"), map[string]string{h: big}, nil)
		if err != nil {
			// The server may close the connection after its 431; the
			// status must still have been sent. Read it over a raw socket.
			status := rawStatus(t, g.Listen, "GET /demo HTTP/1.1\r\nHost: x\r\n"+h+": "+big+"\r\n\r\n")
			if status != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("100 KiB %s: %v; raw status %d, want 431", h, err, status)
			}
			continue
		}
		if r.Status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("100 KiB %s: got %s, want 431", h, r)
		}
	}
	if r := get(t, c, g.url("/demo"), nil); r.Status != 200 {
		t.Errorf("after huge headers: %s", r)
	}
}

// rawStatus sends req over a fresh TCP connection and returns the status
// code of the first response (0 if none arrived).
func rawStatus(t testing.TB, addr, req string) int {
	t.Helper()
	conn := rawConn(t, addr)
	defer conn.Close()
	_, _ = conn.Write([]byte(req))
	resps := readResponses(conn)
	if len(resps) == 0 {
		return 0
	}
	return resps[0].StatusCode
}
