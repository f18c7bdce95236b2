package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// statusServer is an upstream that answers every request with status
// and counts them.
type statusServer struct {
	*httptest.Server
	n atomic.Int64
}

func newStatusServer(t testing.TB, status int) *statusServer {
	s := &statusServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		w.WriteHeader(status)
		fmt.Fprintf(w, "status %d\n", status)
	}))
	t.Cleanup(s.Close)
	return s
}

// targets renders an upstreams list of urls with weights (1 when nil).
func targets(urls []string, weights []int) string {
	var b strings.Builder
	b.WriteString("upstreams = [")
	for i, u := range urls {
		w := 1
		if weights != nil {
			w = weights[i]
		}
		fmt.Fprintf(&b, "{ url = %q, weight = %d }, ", u, w)
	}
	b.WriteString("]")
	return b.String()
}

// TestBalanceWeightedRoundRobin: targets of weights 1, 2, 3 receive
// exactly their shares of 60 requests.
func TestBalanceWeightedRoundRobin(t *testing.T) {
	t.Parallel()
	ups := []*upstream{newUpstream(t), newUpstream(t), newUpstream(t)}
	body := fmt.Sprintf("[[routes]]\nname = \"api\"\npath_prefix = \"/\"\n%s\n",
		targets([]string{ups[0].URL, ups[1].URL, ups[2].URL}, []int{1, 2, 3}))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	for range 60 {
		expect2(t, c, g.url("/x"), nil, 200)
	}
	for i, want := range []int{10, 20, 30} {
		if got := ups[i].count(); got != want {
			t.Errorf("target of weight %d received %d of 60 requests, want %d", i+1, got, want)
		}
	}
}

// TestBalanceLeastRequestPrefersIdle: with least_request over two
// targets, one holding every request it gets, the held one ends up with
// at most two of 40 requests (round robin would send it 20): each
// request goes to the target with fewer in flight.
func TestBalanceLeastRequestPrefersIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var held atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		<-release
	}))
	defer slow.Close()
	defer close(release)
	fast := newUpstream(t)
	body := fmt.Sprintf("[[routes]]\nname = \"api\"\npath_prefix = \"/\"\nbalance = \"least_request\"\n%s\n",
		targets([]string{slow.URL, fast.URL}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 40 {
		done := make(chan struct{})
		held0 := held.Load()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			_, _ = tryDo(c, "GET", g.url("/x"), nil, nil)
		}()
		// Wait until the request is answered (fast) or held (slow). An
		// answered request, not one the fast upstream has only seen: until
		// its answer is back the gateway still counts it in flight there,
		// and the next request would find the two targets tied.
		for deadline := time.Now().Add(10 * time.Second); ; {
			select {
			case <-done:
			default:
				if held.Load() == held0 {
					if time.Now().After(deadline) {
						t.Fatalf("request %d neither answered nor held", i)
					}
					time.Sleep(time.Millisecond)
					continue
				}
			}
			break
		}
	}
	if h := held.Load(); h > 2 || fast.count() < 38 {
		t.Fatalf("the held target got %d requests, the idle one %d, want at most 2 and at least 38", h, fast.count())
	}
}

// TestBalanceHashSticky: balance = "hash" keeps each API key (hash_on =
// client, on a route with a limit) or each X-Tenant value (hash_on =
// header) on one target.
func TestBalanceHashSticky(t *testing.T) {
	t.Parallel()
	ups := []*upstream{newUpstream(t), newUpstream(t), newUpstream(t), newUpstream(t)}
	urls := []string{ups[0].URL, ups[1].URL, ups[2].URL, ups[3].URL}
	body := fmt.Sprintf(`[[limits]]
name = "per-client"
algorithm = "fixed_window"
rates = ["1000/minute"]

[[routes]]
name = "by-client"
path_prefix = "/client"
limits = ["per-client"]
balance = "hash"
%s

[[routes]]
name = "by-tenant"
path_prefix = "/tenant"
balance = "hash"
hash_on = "header:X-Tenant"
%s
`, targets(urls, nil), targets(urls, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	for _, tc := range []struct{ path, header string }{{"/client", "X-API-Key"}, {"/tenant", "X-Tenant"}} {
		owner := map[string]string{}
		// 7 values, 4 targets: a round robin would move each value.
		for i := range 42 {
			v := fmt.Sprint("v-", i%7)
			r := get(t, c, g.url(tc.path), map[string]string{tc.header: v})
			if r.Status != 200 {
				t.Fatalf("%s: %s", tc.path, r)
			}
			var port string
			for k, u := range ups {
				if u.count() > 0 && len(u.all()) > 0 && u.all()[len(u.all())-1].Header.Get(tc.header) == v && u.all()[len(u.all())-1].Path == tc.path {
					port = fmt.Sprint(k)
				}
			}
			if o, ok := owner[v]; ok && o != port {
				t.Fatalf("%s %s=%s went to target %s, then to %s", tc.path, tc.header, v, o, port)
			}
			owner[v] = port
		}
	}
}

// TestBalanceTargetKilled: of two targets, one is killed (its listener
// closed) mid-run. POSTs to it fail (502) and are never retried; GETs
// (retries = 1) all succeed, retried on the live target, and its
// connection failures eject it (consecutive_failures = 5): then every
// request goes to the live target at once, and a reload that keeps the
// route keeps the ejection.
func TestBalanceTargetKilled(t *testing.T) {
	t.Parallel()
	live, doomed := newUpstream(t), newUpstream(t)
	route := func(extra string) string {
		return fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
retries = 1
outlier_detection = { consecutive_failures = 5, base_ejection = "1h", max_ejection = "1h" }
%s
%s`, targets([]string{live.URL, doomed.URL}, nil), extra)
	}
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": route(""), "Server": ""}})
	c := newClient(t, "")
	for range 4 {
		expect2(t, c, g.url("/x"), nil, 200)
	}
	if live.count() != 2 || doomed.count() != 2 {
		t.Fatalf("before the kill: %d and %d requests, want 2 and 2", live.count(), doomed.count())
	}
	doomed.CloseClientConnections()
	doomed.Close()

	// POSTs alternate: two reach the live target, two fail on the dead
	// one and are not tried elsewhere.
	statuses := map[int]int{}
	for range 4 {
		statuses[do(t, c, "POST", g.url("/x"), nil).Status]++
	}
	if statuses[200] != 2 || statuses[502] != 2 || live.count() != 4 {
		t.Fatalf("4 POSTs after the kill: statuses %v, live target received %d in all; want 2×200, 2×502, 4", statuses, live.count())
	}
	// GETs: every one succeeds; the dead target's 3rd, 4th and 5th
	// failures eject it.
	for i := range 10 {
		if r := get(t, c, g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("GET %d after the kill: %s", i, r)
		}
	}
	// Ejected: every POST reaches the live target.
	for i := range 6 {
		if r := do(t, c, "POST", g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("POST %d after the ejection: %s", i, r)
		}
	}
	// A reload that leaves the route as it was keeps its ejection.
	before := readyz(t, g).LastReload.At
	g.rewrite(t, map[string]any{"Body": route("\n[[routes]]\nname = \"other\"\npath_prefix = \"/other\"\nrespond = { status = 204 }\n")})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload: %s", r)
	}
	if rd := waitReload(t, g, before); !rd.LastReload.OK {
		t.Fatalf("reload failed: %+v", rd.LastReload)
	}
	expect2(t, c, g.url("/other"), nil, 204)
	for i := range 6 {
		if r := do(t, c, "POST", g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("POST %d after the reload: %s (the ejection was lost)", i, r)
		}
	}
	if want := 4 + 10 + 12; live.count() != want {
		t.Fatalf("the live target received %d requests, want %d", live.count(), want)
	}
}

// TestBalanceRetryBudget: with every target answering 503, 50 GETs with
// retries = 2 reach the targets at most 50 × 1.2 + 3 times (budget 20 %
// plus 3): retries do not multiply an outage.
func TestBalanceRetryBudget(t *testing.T) {
	t.Parallel()
	a, b, c3 := newStatusServer(t, 503), newStatusServer(t, 503), newStatusServer(t, 503)
	body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
retries = 2
retry_budget = { percent = 20, window = "1h", min_retries = 3 }
outlier_detection = { consecutive_failures = 0 }
%s
`, targets([]string{a.URL, b.URL, c3.URL}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	for range 50 {
		expect2(t, c, g.url("/x"), nil, 503)
	}
	got := a.n.Load() + b.n.Load() + c3.n.Load()
	if got < 53 || got > 63 {
		t.Fatalf("the targets received %d requests for 50, want 53..63", got)
	}
}

// TestBalanceRetryCountedOnce: a request retried after a 503 is counted
// once by a limit that counts requests (its remaining falls by one per
// request) and not at all by a limit counting 503 answers, which only
// the final answer (200) reaches; the retries are counted in
// tollgate_upstream_retries_total.
func TestBalanceRetryCountedOnce(t *testing.T) {
	t.Parallel()
	bad, good := newStatusServer(t, 503), newUpstream(t)
	body := fmt.Sprintf(`[[limits]]
name = "requests"
algorithm = "fixed_window"
rates = ["10/1h"]

[[limits]]
name = "unavailable"
algorithm = "fixed_window"
rates = ["2/1h"]
count = "response"
count_statuses = ["503"]

[[routes]]
name = "api"
path_prefix = "/"
limits = ["requests", "unavailable"]
retries = 1
retry_budget = { percent = 100 }
outlier_detection = { consecutive_failures = 0 }
%s
`, targets([]string{bad.URL, good.URL}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "k"}
	for i := range 10 {
		r := get(t, c, g.url("/x"), key)
		if r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
		if want := fmt.Sprintf(`"requests";r=%d;`, 9-i); !strings.Contains(r.Header.Get("RateLimit"), want) {
			t.Fatalf("request %d: RateLimit %q, want %s", i, r.Header.Get("RateLimit"), want)
		}
	}
	if bad.n.Load() != 5 || good.count() != 10 {
		t.Fatalf("the 503 target received %d, the good one %d; want 5 and 10", bad.n.Load(), good.count())
	}
	if n := scrape(t, g, "").family("tollgate_upstream_retries_total", `http_route="api"`).sum(); n != 5 {
		t.Fatalf("tollgate_upstream_retries_total{http_route=\"api\"} = %v, want 5", n)
	}
	if r := get(t, c, g.url("/x"), key); r.Status != 429 {
		t.Fatalf("11th request: %s, want 429", r)
	}
}

// TestBalanceHostileHashHeader: with server.max_header_bytes raised to
// 2 MiB, a 1 MiB hash header is hashed whole: two values differing only
// in their last byte are each sticky, and the gateway answers them as
// any other; a request without the header goes round robin.
func TestBalanceHostileHashHeader(t *testing.T) {
	t.Parallel()
	ups := []*upstream{newUpstream(t), newUpstream(t), newUpstream(t)}
	body := fmt.Sprintf("[[routes]]\nname = \"api\"\npath_prefix = \"/\"\nbalance = \"hash\"\nhash_on = \"header:X-Tenant\"\n%s\n",
		targets([]string{ups[0].URL, ups[1].URL, ups[2].URL}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": "max_header_bytes = 2097152"}})
	c := newClient(t, "")
	counts := func() [3]int { return [3]int{ups[0].count(), ups[1].count(), ups[2].count()} }
	for _, last := range []string{"a", "b", "c", "d"} {
		v := strings.Repeat("x", 1<<20) + last
		before := counts()
		for range 3 {
			if r := get(t, c, g.url("/x"), map[string]string{"X-Tenant": v}); r.Status != 200 {
				t.Fatalf("1 MiB hash header: %d", r.Status)
			}
		}
		after := counts()
		moved := 0
		for i := range after {
			if after[i] != before[i] {
				moved++
			}
		}
		if moved != 1 {
			t.Fatalf("one 1 MiB value went to %d targets (counts %v → %v), want 1", moved, before, after)
		}
	}
	before := counts()
	for range 3 {
		expect2(t, c, g.url("/x"), nil, 200)
	}
	after := counts()
	for i := range after {
		if after[i] != before[i]+1 {
			t.Fatalf("3 requests without the header: counts %v → %v, want one each", before, after)
		}
	}
}

// TestBalanceHangingTargetEjected: a target that accepts requests and
// never answers is ended by the route's timeout on every request it gets.
// Those timeouts are its failures: after consecutive_failures of them it
// is ejected, and the other target serves the rest (before, a timeout
// counted as nothing, and the hanging target kept its share of requests,
// each answered 504 after the whole timeout, for as long as it hung).
// A slow upload the route's timeout ends is the client's doing, and
// tells passive health nothing: the target stays in.
func TestBalanceHangingTargetEjected(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var hung atomic.Int64
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	good := newUpstream(t)
	body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
timeout = "300ms"
outlier_detection = { consecutive_failures = 2, base_ejection = "1h", max_ejection = "1h" }
%s
`, targets([]string{good.URL, hang.URL}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	// Four slow uploads, two to each target: the route's timeout ends
	// each while its body is still arriving. Neither target is ejected.
	for i := range 4 {
		if st := slowUpload(t, g); st != 408 && st != 504 {
			t.Fatalf("slow upload %d: status %d, want 408 or 504", i, st)
		}
	}
	for _, r := range adminUpstreams(t, g).Routes {
		for _, tg := range r.Targets {
			if !tg.Healthy {
				t.Fatalf("after 4 slow uploads, target %s is ejected: the client's slowness was held against it", tg.Address)
			}
		}
	}
	hung.Store(0)
	c := newClient(t, "")
	statuses := map[int]int{}
	for range 12 {
		statuses[get(t, c, g.url("/x"), nil).Status]++
	}
	if statuses[504] != 2 || statuses[200] != 10 || hung.Load() != 2 {
		t.Fatalf("12 GETs over a good and a hanging target: statuses %v, the hanging one received %d; "+
			"want 2×504 then the hanging target ejected (2 requests), 10×200", statuses, hung.Load())
	}
	for _, r := range adminUpstreams(t, g).Routes {
		for _, tg := range r.Targets {
			if want := tg.Address != strings.TrimPrefix(hang.URL, "http://"); tg.Healthy != want {
				t.Errorf("target %s healthy %v, want %v", tg.Address, tg.Healthy, want)
			}
		}
	}
}

// slowUpload sends a POST announcing a 10-byte body, sends one byte, and
// returns the status the gateway answers (the route's timeout ends the
// wait); the connection is closed after.
func slowUpload(t *testing.T, g *gw) int {
	t.Helper()
	conn, err := net.Dial("tcp", g.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
	if _, err := io.WriteString(conn, "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 10\r\n\r\na"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("slow upload: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBalanceClientCannotEjectBy500: a client that finds a path every
// target answers 500 (a bug the client can reach, unauthenticated) sends
// it to each target 3 times in a row, consecutive_failures. A 500 is the
// application's answer to that request, the same on every target, not a
// sign of the target's health: no target is ejected and the traffic
// that follows is still shared. Before, one of the two was ejected for
// an hour, and all of the next 10 requests went to the other: a client
// could halve a route's capacity at will, for up to max_ejection each
// time. A 502, 503 or 504 still counts (TestBalanceTargetKilled,
// TestBalanceHangingTargetEjected).
func TestBalanceClientCannotEjectBy500(t *testing.T) {
	t.Parallel()
	var served [2]atomic.Int64
	var urls []string
	for i := range served {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/boom" {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			served[i].Add(1)
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
outlier_detection = { consecutive_failures = 3, base_ejection = "1h", max_ejection = "1h" }
%s
`, targets(urls, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	for range 6 {
		expect2(t, c, g.url("/boom"), nil, 500)
	}
	for range 10 {
		expect2(t, c, g.url("/x"), nil, 200)
	}
	if a, b := served[0].Load(), served[1].Load(); a != 5 || b != 5 {
		t.Fatalf("after 6 requests answered 500, 10 requests went %d and %d to the two targets, want 5 and 5 "+
			"(a target ejected for the application's 500s)", a, b)
	}
}

// TestUpstreamLoopDetected: a route whose upstreams lead back to the
// gateway's own listener (a careless configuration, or a target's DNS
// name pointed at the gateway) is answered 508 after one hop, on a
// balanced route and on a single upstream alike. Before, one request
// forwarded itself thousands of times (about 30,000 goroutines and
// 15,000 descriptors within two seconds) until the route's timeout
// ended the chain with a 504. Another gateway's Via entry passes, and
// the upstream sees both entries.
func TestUpstreamLoopDetected(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	bodyOf := func(self string) string {
		return fmt.Sprintf(`[[routes]]
name = "ok"
path_prefix = "/ok"
upstream = %q

[[routes]]
name = "single"
path_prefix = "/single"
upstream = %q
timeout = "500ms"

[[routes]]
name = "api"
path_prefix = "/"
upstreams = [%q, "%s/b"]
retries = 1
timeout = "500ms"
`, up.URL, self, self, self)
	}
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": bodyOf(up.URL), "Server": ""}})
	before := readyz(t, g).LastReload.At
	g.rewrite(t, map[string]any{"Body": bodyOf("http://" + g.Listen)})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload: %s", r)
	}
	if rd := waitReload(t, g, before); !rd.LastReload.OK {
		t.Fatalf("reload failed: %+v", rd.LastReload)
	}
	c := newClient(t, "")
	for _, path := range []string{"/x", "/single/x"} {
		if r := get(t, c, g.url(path), nil); r.Status != 508 {
			t.Fatalf("GET %s through a route leading back to the gateway: %s, want 508 Loop Detected", path, r)
		}
	}
	r := get(t, c, g.url("/ok/x"), map[string]string{"Via": "1.1 tollgate-0123456789abcdef"})
	if r.Status != 200 {
		t.Fatalf("GET /ok/x with another gateway's Via: %s, want 200", r)
	}
	reqs := up.all()
	via := reqs[len(reqs)-1].Header.Values("Via")
	if len(via) != 2 || via[0] != "1.1 tollgate-0123456789abcdef" || !strings.HasPrefix(via[1], "1.1 tollgate-") || via[1] == via[0] {
		t.Fatalf("the upstream saw Via %q, want the client's entry then the gateway's own", via)
	}
}

// TestBalanceRetryAfterStalled503: a target that answers 503 and then
// stalls its body (headers sent, Content-Length promised, no byte after)
// does not hold the retry up: the next target answers the client 200.
// Before, the dropped 503's body was drained before the next attempt,
// and the drain waited for the stalled body until the route's timeout
// ended the whole request with a 504: a retryable failure became a
// timeout.
func TestBalanceRetryAfterStalled503(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stall.Close()
	defer close(release)
	good := newUpstream(t)
	body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
retries = 1
retry_budget = { percent = 100 }
timeout = "3s"
outlier_detection = { consecutive_failures = 0 }
%s
`, targets([]string{stall.URL, good.URL}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	for i := range 4 {
		if r := get(t, c, g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("GET %d: %s, want 200 from the good target after the stalled 503", i, r)
		}
	}
}

// TestBalanceRetryKeepsRequest: a retried request reaches the second
// target as it reached the first: the same X-Request-Id (one request,
// one id, in the access log and at every target it reached), the
// headers the route's header rules set, and the path. When every
// attempt is answered 503, the client receives the last target's 503
// with its body and headers intact.
func TestBalanceRetryKeepsRequest(t *testing.T) {
	t.Parallel()
	type got struct{ id, rule, path string }
	var mu sync.Mutex
	var seen []got
	var fail [2]atomic.Bool
	var urls []string
	for i := range fail {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, got{r.Header.Get("X-Request-Id"), r.Header.Get("X-Rule"), r.URL.Path})
			mu.Unlock()
			if fail[i].Load() {
				w.Header().Set("X-Target", fmt.Sprint(i))
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "target %d is down for maintenance", i)
			}
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	fail[0].Store(true)
	body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
retries = 1
retry_budget = { percent = 100 }
outlier_detection = { consecutive_failures = 0 }
request_headers = { set = { "X-Rule" = "r-{request_id}" } }
%s
`, targets(urls, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := newClient(t, "")
	r := get(t, c, g.url("/a/b"), nil)
	mu.Lock()
	defer mu.Unlock()
	if r.Status != 200 || len(seen) != 2 {
		t.Fatalf("GET: %s, %d attempts; want 200 after 2", r, len(seen))
	}
	id := r.Header.Get("X-Request-Id")
	for i, s := range seen {
		if s.id == "" || s.id != id || s.rule != "r-"+id || s.path != "/a/b" {
			t.Errorf("attempt %d reached its target as %+v; want id %q, X-Rule r-%s, path /a/b", i+1, s, id, id)
		}
	}
	// Both down: the last 503 reaches the client whole.
	fail[1].Store(true)
	mu.Unlock() // the targets record this request's attempts
	r = get(t, c, g.url("/a/b"), nil)
	mu.Lock()
	if r.Status != 503 || r.Header.Get("X-Target") == "" || string(r.Body) != "target "+r.Header.Get("X-Target")+" is down for maintenance" {
		t.Fatalf("both targets 503: %s (X-Target %q), want the last target's 503 with its body", r, r.Header.Get("X-Target"))
	}
}

// TestBalanceRetryBuffersBounded: retry bodies are buffered within a
// process-wide bound. 24 concurrent PUTs of 8 MiB on a route with
// retry_body_bytes at its 16 MiB maximum, held by their target: at most
// 64 MiB of them are buffered, the others streamed (and not retried).
// Before, each was buffered whole, 192 MiB of the clients' bytes held in
// the gateway's heap at once: memory that any client's concurrent
// uploads grew at will.
func TestBalanceRetryBuffersBounded(t *testing.T) {
	t.Parallel()
	const n, size = 24, 8 << 20
	release := make(chan struct{})
	var arrived atomic.Int64
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hold.Close()
	body := fmt.Sprintf(`[[routes]]
name = "api"
path_prefix = "/"
retries = 1
retry_body_bytes = %d
timeout = "2m"
%s
`, 16<<20, targets([]string{hold.URL, hold.URL + "/b"}, nil))
	g := startGateway(t, "balance.toml.tmpl", gwOpts{Data: map[string]any{"Body": body, "Server": ""}})
	c := &http.Client{Timeout: 2 * time.Minute}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("PUT", g.url("/x"), io.LimitReader(zeros{}, size))
			req.ContentLength = size
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	eventually(t, "every PUT at its target", func() bool { return arrived.Load() == n })
	heap := scrape(t, g, "")["go_memstats_heap_inuse_bytes"]
	close(release)
	wg.Wait()
	t.Logf("heap in use with %d PUTs of %d MiB held: %.0f MiB", n, size>>20, heap/(1<<20))
	if heap > 128<<20 {
		t.Fatalf("with %d PUTs of %d MiB held, the gateway's heap holds %.0f MiB; want at most 128 (64 MiB of retry buffers and the rest)",
			n, size>>20, heap/(1<<20))
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
