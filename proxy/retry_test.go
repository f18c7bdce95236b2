package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
)

// target is a test upstream that answers status (200 when 0) with what
// it received: its name, the path and the body's length.
type target struct {
	*upstream
	status atomic.Int64
	bodies atomic.Int64 // bytes of request bodies received
}

func newTarget(t *testing.T, name string) *target {
	tg := &target{}
	tg.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		tg.bodies.Add(n)
		if s := tg.status.Load(); s != 0 {
			w.WriteHeader(int(s))
		}
		fmt.Fprintf(w, "%s %s %d", name, r.URL.Path, n)
	})
	return tg
}

// balanced returns a route over the targets' URLs (each with the base
// path of its name) with its outlier detection off unless set after.
func balanced(urls ...string) config.RouteConfig {
	rt := route("api", "/", "")
	for _, u := range urls {
		rt.Upstreams = append(rt.Upstreams, config.TargetConfig{URL: u, Weight: 1})
	}
	rt.OutlierDetection.ConsecutiveFailures = 0
	return rt
}

func do(t *testing.T, method, url string, body io.Reader, size int64, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if size >= -1 && body != nil {
		req.ContentLength = size
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Weighted round robin across targets with different base paths: a
// cycle of the weights 1, 2, 3 sends each target its share, each request
// to the target's base path joined to the forwarded path.
func TestBalancedRoundRobin(t *testing.T) {
	a, b, c := newTarget(t, "a"), newTarget(t, "b"), newTarget(t, "c")
	p := compile(t, func(cfg *config.Config) {
		rt := balanced(a.URL+"/a", b.URL+"/b/", c.URL)
		rt.Upstreams[1].Weight, rt.Upstreams[2].Weight = 2, 3
		cfg.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	got := map[string]int{}
	for range 60 {
		status, body := do(t, "GET", gw.URL+"/x/y", nil, 0)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		got[body]++
	}
	want := map[string]int{"a /a/x/y 0": 10, "b /b/x/y 0": 20, "c /x/y 0": 30}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
}

// Which requests are retried. The first target answers 503 (or refuses
// the connection), the second 200; retries = 1, retry_body_bytes = 64.
// Only idempotent methods whose body fits (or is empty) are tried again,
// and the body reaches each target intact.
func TestRetryTable(t *testing.T) {
	small, big := strings.Repeat("s", 64), strings.Repeat("b", 65)
	for _, c := range []struct {
		name    string
		method  string
		body    string
		size    int64 // -1: chunked
		hdr     []string
		first   int // the first target's answer; 0: refuses the connection
		status  int // the client's
		toFirst int // requests the first target received
		toNext  int // and the second
	}{
		{"GET 503", "GET", "", 0, nil, 503, 200, 1, 1},
		{"GET 502", "GET", "", 0, nil, 502, 200, 1, 1},
		{"GET refused", "GET", "", 0, nil, 0, 200, 0, 1},
		{"GET 500 is an answer", "GET", "", 0, nil, 500, 500, 1, 0},
		{"GET 504 is an answer", "GET", "", 0, nil, 504, 504, 1, 0},
		{"HEAD", "HEAD", "", 0, nil, 503, 200, 1, 1},
		{"OPTIONS", "OPTIONS", "", 0, nil, 503, 200, 1, 1},
		{"DELETE", "DELETE", "", 0, nil, 503, 200, 1, 1},
		{"PUT body within the limit", "PUT", small, 64, nil, 503, 200, 1, 1},
		{"PUT chunked body within the limit", "PUT", small, -1, nil, 503, 200, 1, 1},
		{"PUT body beyond the limit", "PUT", big, 65, nil, 503, 503, 1, 0},
		{"PUT chunked body beyond the limit", "PUT", big, -1, nil, 503, 503, 1, 0},
		{"PUT refused, body beyond the limit", "PUT", big, 65, nil, 0, 502, 0, 0},
		{"POST", "POST", small, 64, nil, 503, 503, 1, 0},
		{"POST refused", "POST", "", 0, nil, 0, 502, 0, 0},
		{"PATCH", "PATCH", small, 64, nil, 503, 503, 1, 0},
		{"PUT Expect: 100-continue", "PUT", small, 64, []string{"Expect", "100-continue"}, 503, 503, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, next := newTarget(t, "first"), newTarget(t, "next")
			firstURL := first.URL
			var ln net.Listener
			if c.first == 0 {
				var err error
				if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				firstURL = "http://" + ln.Addr().String()
			} else {
				first.status.Store(int64(c.first))
			}
			p := compile(t, func(cfg *config.Config) {
				rt := balanced(firstURL, next.URL)
				rt.Retries, rt.RetryBodyBytes = 1, 64
				cfg.Routes = []config.RouteConfig{rt}
			})
			gw := serveMemory(t, p)
			if ln != nil {
				// Closed once the gateway listens: the port freed first
				// would be the next listener's, the gateway's own, and
				// the "refused" target the gateway itself.
				ln.Close()
			}
			var body io.Reader
			if c.body != "" {
				body = bytes.NewReader([]byte(c.body))
				if c.size < 0 {
					body = io.MultiReader(body) // hides the length: chunked
				}
			}
			status, _ := do(t, c.method, gw.URL+"/x", body, c.size, c.hdr...)
			if status != c.status {
				t.Errorf("status %d, want %d", status, c.status)
			}
			if got := first.hits.Load(); c.first != 0 && got != int64(c.toFirst) {
				t.Errorf("first target received %d requests, want %d", got, c.toFirst)
			}
			if got := next.hits.Load(); got != int64(c.toNext) {
				t.Errorf("second target received %d requests, want %d", got, c.toNext)
			}
			if c.method != "HEAD" {
				if got, want := first.bodies.Load()+next.bodies.Load(), int64(len(c.body))*(int64(c.toFirst)+int64(c.toNext)); c.first != 0 && got != want {
					t.Errorf("targets received %d body bytes, want %d (the body intact on each attempt)", got, want)
				}
			}
		})
	}
}

// With every target answering 503, retries do not multiply the load: a
// budget of 20 % plus 3 lets at most 100 requests × 1.2 + 3 reach the
// targets, however many retries the route allows.
func TestRetryBudgetBoundsLoad(t *testing.T) {
	ts := []*target{newTarget(t, "a"), newTarget(t, "b"), newTarget(t, "c")}
	var urls []string
	for _, x := range ts {
		x.status.Store(503)
		urls = append(urls, x.URL)
	}
	p := compile(t, func(cfg *config.Config) {
		rt := balanced(urls...)
		rt.Retries = 2
		rt.RetryBudget = config.RetryBudgetConfig{Percent: 20, Window: "1h", MinRetries: 3}
		cfg.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	const requests = 100
	for range requests {
		if status, _ := do(t, "GET", gw.URL+"/x", nil, 0); status != 503 {
			t.Fatalf("status %d, want the targets' 503", status)
		}
	}
	var got int64
	for _, x := range ts {
		got += x.hits.Load()
	}
	if got > requests*120/100+3 || got < requests+3 {
		t.Fatalf("the targets received %d requests for %d, want %d..%d", got, requests, requests+3, requests*120/100+3)
	}
}

// Passive health: a target failing consecutive_failures times in a row
// (a 502, 503 or 504) is ejected and gets nothing until its ejection
// ends; another 5xx is the application's answer, which a client can
// provoke at will, and ejects nothing.
func TestPassiveEjection(t *testing.T) {
	for _, tc := range []struct {
		status int
		ejects bool
	}{{502, true}, {503, true}, {504, true}, {500, false}, {501, false}, {505, false}, {404, false}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			bad, good := newTarget(t, "bad"), newTarget(t, "good")
			bad.status.Store(int64(tc.status))
			p := compile(t, func(cfg *config.Config) {
				rt := balanced(bad.URL, good.URL)
				rt.OutlierDetection = config.OutlierConfig{ConsecutiveFailures: 2, BaseEjection: "1h", MaxEjection: "1h"}
				cfg.Routes = []config.RouteConfig{rt}
			})
			gw := serveMemory(t, p)
			for range 20 {
				do(t, "GET", gw.URL+"/x", nil, 0)
			}
			// Round robin: bad, good, bad (ejected), then good only.
			want := int64(10)
			if tc.ejects {
				want = 2
			}
			if got := bad.hits.Load(); got != want {
				t.Fatalf("the target answering %d received %d requests, want %d", tc.status, got, want)
			}
			if got := good.hits.Load(); got != 20-want {
				t.Fatalf("the healthy target received %d requests, want %d", got, 20-want)
			}
		})
	}
}

// Hash on a header: one value sticks to one target, values spread over
// the targets, and a request without the header is balanced by round
// robin.
func TestHashHeaderSticks(t *testing.T) {
	var urls []string
	for i := range 5 {
		urls = append(urls, newTarget(t, fmt.Sprint("t", i)).URL)
	}
	p := compile(t, func(cfg *config.Config) {
		rt := balanced(urls...)
		rt.Balance, rt.HashOn = "hash", "header:X-Tenant"
		cfg.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	owner := map[string]string{}
	for i := range 210 {
		tenant := fmt.Sprint("tenant-", i%21) // 21 and 5 coprime: round robin would move them
		_, body := do(t, "GET", gw.URL+"/x", nil, 0, "X-Tenant", tenant)
		name, _, _ := strings.Cut(body, " ")
		if o, ok := owner[tenant]; ok && o != name {
			t.Fatalf("%s went to %s, then to %s", tenant, o, name)
		}
		owner[tenant] = name
	}
	distinct := map[string]bool{}
	for _, o := range owner {
		distinct[o] = true
	}
	if len(distinct) < 3 {
		t.Fatalf("21 tenants went to %d targets", len(distinct))
	}
	// No header: round robin, every target in 5 requests.
	seen := map[string]bool{}
	for range 5 {
		_, body := do(t, "GET", gw.URL+"/x", nil, 0)
		name, _, _ := strings.Cut(body, " ")
		seen[name] = true
	}
	if len(seen) != 5 {
		t.Fatalf("5 requests without the header went to %d targets, want 5", len(seen))
	}
}

// Hash on the client: the API key sticks, on a route with no limit (the
// identity is resolved for the hash alone).
func TestHashClientSticks(t *testing.T) {
	var urls []string
	for i := range 4 {
		urls = append(urls, newTarget(t, fmt.Sprint("t", i)).URL)
	}
	p := compile(t, func(cfg *config.Config) {
		rt := balanced(urls...)
		rt.Balance = "hash"
		cfg.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	owners := map[string]bool{}
	for i := range 42 {
		key := fmt.Sprint("key-", i%7) // 7 and 4 coprime: round robin would move them
		_, body := do(t, "GET", gw.URL+"/x", nil, 0, "X-API-Key", key)
		name, _, _ := strings.Cut(body, " ")
		owners[key+"="+name] = true
	}
	if len(owners) != 7 {
		t.Fatalf("7 API keys had %d key-target pairs, want 7 (each key sticks)", len(owners))
	}
}

// A client that goes away during an attempt ends the request: nothing is
// retried on the next target.
func TestRetryNotAfterClientLeft(t *testing.T) {
	arrived, done := make(chan struct{}, 1), make(chan struct{}, 1)
	first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
		done <- struct{}{}
	})
	next := newTarget(t, "next")
	p := compile(t, func(cfg *config.Config) {
		rt := balanced(first.URL, next.URL)
		rt.Retries = 1
		cfg.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/x", nil)
	go func() {
		<-arrived
		cancel()
	}()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request succeeded after its client went away")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the first target's request never ended")
	}
	// Another request proves the gateway is done with the first.
	if status, _ := do(t, "GET", gw.URL+"/x", nil, 0); status != 200 {
		t.Fatalf("next request: %d", status)
	}
	if got := next.hits.Load(); got != 1 {
		t.Fatalf("the second target received %d requests, want 1 (only the next request; the abandoned one not retried)", got)
	}
}
