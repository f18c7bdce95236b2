package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// queueUpstream serves at most capacity requests at once, each for
// service, and queues the rest in arrival order: its latency grows with
// the load, as a thread pool's does. The capacity may change while it
// runs. With failing set it answers every request at once with a 500.
type queueUpstream struct {
	*httptest.Server
	service time.Duration
	mu      sync.Mutex
	cond    *sync.Cond
	cap     int
	busy    int
	failing atomic.Bool
	peak    atomic.Int64 // most requests being served at once
}

func newQueueUpstream(t testing.TB, capacity int, service time.Duration) *queueUpstream {
	u := &queueUpstream{service: service, cap: capacity}
	u.cond = sync.NewCond(&u.mu)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.failing.Load() {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		u.mu.Lock()
		for u.busy >= u.cap {
			u.cond.Wait()
		}
		u.busy++
		if int64(u.busy) > u.peak.Load() {
			u.peak.Store(int64(u.busy))
		}
		u.mu.Unlock()
		time.Sleep(u.service)
		u.mu.Lock()
		u.busy--
		u.cond.Broadcast()
		u.mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *queueUpstream) setCapacity(c int) {
	u.mu.Lock()
	u.cap = c
	u.cond.Broadcast()
	u.mu.Unlock()
}

// adaptiveBody is one adaptive limit "up" (extra settings appended) on a
// route "/" to upstream.
func adaptiveBody(upstream, extra string) string {
	return fmt.Sprintf(`[[limits]]
name = "up"
algorithm = "adaptive_concurrency"
by = []
%s

[[routes]]
name = "all"
path_prefix = "/"
upstream = %q
limits = ["up"]
`, extra, upstream)
}

// adaptiveState reads the limit "up" from /admin/limits.
func adaptiveState(t testing.TB, g *gw) adaptiveLimiter {
	t.Helper()
	r := do(t, http.DefaultClient, "GET", g.adminURL("/admin/limits?limit=up"), nil)
	if r.Status != 200 {
		t.Fatalf("/admin/limits?limit=up: %s", r)
	}
	var v struct {
		Algorithm string            `json:"algorithm"`
		Limiters  []adaptiveLimiter `json:"limiters"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil || v.Algorithm != "adaptive_concurrency" || len(v.Limiters) != 1 {
		t.Fatalf("/admin/limits?limit=up: %v: %s", err, r.Body)
	}
	return v.Limiters[0]
}

type adaptiveLimiter struct {
	LearnedLimit float64           `json:"learned_limit"`
	InFlight     int64             `json:"in_flight"`
	MinLatencyMS float64           `json:"min_latency_ms"`
	SampleMS     float64           `json:"sample_latency_ms"`
	Shed         map[string]uint64 `json:"shed"`
}

// closedLoad runs n closed-loop clients against url until stop closes: each
// sends its next request when the last one ended, 20ms after a 503. It
// counts the answers by status; any answer but 200 and 503 fails the test,
// and so does a 503 without Retry-After.
type closedLoad struct {
	ok, shed, other atomic.Int64
	wg              sync.WaitGroup
	stop            chan struct{}
}

func startLoad(t *testing.T, url string, n int, hdr func(i int) map[string]string) *closedLoad {
	l := &closedLoad{stop: make(chan struct{})}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var h map[string]string
			if hdr != nil {
				h = hdr(i)
			}
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				r, err := tryDo(c, "GET", url, h, nil)
				switch {
				case err != nil:
					l.other.Add(1)
				case r.Status == 200:
					l.ok.Add(1)
				case r.Status == 503 && r.Header.Get("Retry-After") != "":
					l.shed.Add(1)
					time.Sleep(20 * time.Millisecond)
				default:
					t.Errorf("answer %s, want 200 or 503 with Retry-After", r)
					l.other.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *closedLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitLimit polls the learned limit until ok accepts it, failing after
// deadline (a hang guard, generous for a loaded machine: the property is
// measured in BENCHMARKS.md).
func waitLimit(t *testing.T, g *gw, what string, deadline time.Duration, ok func(float64) bool) adaptiveLimiter {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		s := adaptiveState(t, g)
		if ok(s.LearnedLimit) {
			return s
		}
		if time.Now().After(end) {
			t.Fatalf("%s: learned limit %.1f after %v (%+v)", what, s.LearnedLimit, deadline, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAdaptiveFollowsCapacity drives the binary with 8×C closed-loop
// clients against an upstream of capacity C whose capacity halves, then
// doubles back, mid-test: the learned limit settles near C, follows it
// down and up, and every request is answered 200 or 503 with Retry-After
// (shed, never an error).
func TestAdaptiveFollowsCapacity(t *testing.T) {
	const c = 16
	up := newQueueUpstream(t, c, 50*time.Millisecond)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(up.URL, "min_in_flight = 2\nmax_in_flight = 500")}})
	l := startLoad(t, g.url("/x"), 8*c, nil)

	// The lower bounds leave room for a machine whose scheduling adds
	// latency of its own (under the race detector the limit settled at
	// 0.78 C on a loaded machine).
	s := waitLimit(t, g, "settling", 60*time.Second, func(v float64) bool { return v >= 0.7*c && v <= 3*c })
	t.Logf("settled: %+v", s)
	up.setCapacity(c / 2)
	s = waitLimit(t, g, "capacity halved", 60*time.Second, func(v float64) bool { return v <= 1.6*c/2+4 })
	t.Logf("after halving: %+v", s)
	up.setCapacity(c)
	s = waitLimit(t, g, "capacity restored", 60*time.Second, func(v float64) bool { return v >= 0.7*c })
	t.Logf("after doubling: %+v", s)
	l.end()
	if l.shed.Load() == 0 || l.ok.Load() == 0 || l.other.Load() != 0 {
		t.Fatalf("answers: %d ok, %d shed, %d other; want both ok and shed, nothing else", l.ok.Load(), l.shed.Load(), l.other.Load())
	}
	if s.Shed["normal"] == 0 {
		t.Fatalf("shed counts %v: the 503s were not counted as normal", s.Shed)
	}
}

// TestAdaptiveErrorsAreNotCapacity: an upstream answering every request
// at once with a 500 looks fast, but its errors are no latency samples:
// the learned limit does not rise above where it started.
func TestAdaptiveErrorsAreNotCapacity(t *testing.T) {
	up := newQueueUpstream(t, 4, 20*time.Millisecond)
	up.failing.Store(true)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(up.URL, "min_in_flight = 2\nmax_in_flight = 500")}})
	start := adaptiveState(t, g).LearnedLimit
	c := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				r, err := tryDo(c, "GET", g.url("/x"), nil, nil)
				if err != nil || (r.Status != 500 && r.Status != 503) {
					t.Errorf("answer %v %v, want the upstream's 500 or a 503", r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if s := adaptiveState(t, g); s.LearnedLimit > start {
		t.Fatalf("after 2000 fast 500s the learned limit rose from %.1f to %.1f", start, s.LearnedLimit)
	}
}

// TestAdaptivePriority: with the limit pinned at 4 (min = max) and
// reserve 0.5, sheddable requests are admitted up to 1 in flight, normal
// ones up to 2, critical ones up to 4; a request over its class's share is
// shed with 503 and Retry-After at once (max_delay 0), outcome shed. A
// client outside priority_trusted_from saying it is critical is normal.
func TestAdaptivePriority(t *testing.T) {
	gt := newGate(t)
	for _, tc := range []struct {
		name, trusted string
		critical      bool // whether "critical" is believed
	}{
		{"trusted", `["127.0.0.0/8"]`, true},
		{"untrusted", `["10.0.0.0/8"]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
				"Body": adaptiveBody(gt.URL, `min_in_flight = 4
max_in_flight = 4
reserve = 0.5
priority_header = "X-Priority"
priority_trusted_from = `+tc.trusted)}})
			url := g.url("/x")
			pr := func(p string) map[string]string { return map[string]string{"X-Priority": p} }
			var hs []*held
			hs = append(hs, holdAdmitted(t, gt, url, tc.name+"-s1", pr("sheddable")))
			if tc.critical {
				if r := do(t, http.DefaultClient, "GET", url, pr("sheddable")); r.Status != 503 || r.Header.Get("Retry-After") != "1" {
					t.Fatalf("second sheddable: %s, want 503 with Retry-After: 1", r)
				}
			}
			hs = append(hs, holdAdmitted(t, gt, url, tc.name+"-n1", pr("normal")))
			if r := do(t, http.DefaultClient, "GET", url, pr("normal")); r.Status != 503 {
				t.Fatalf("third request, normal: %s, want 503", r)
			}
			r := do(t, http.DefaultClient, "GET", url, pr("critical"))
			if !tc.critical {
				if r.Status != 503 {
					t.Fatalf("'critical' from an untrusted peer: %s, want 503 as for normal", r)
				}
			} else {
				if r.Status != 200 {
					// The gate holds only requests with its header;
					// this one passed straight through.
					t.Fatalf("critical within the reserve: %s, want 200", r)
				}
				hs = append(hs, holdAdmitted(t, gt, url, tc.name+"-c1", pr("critical")))
				hs = append(hs, holdAdmitted(t, gt, url, tc.name+"-c2", pr("critical")))
				if r := do(t, http.DefaultClient, "GET", url, pr("critical")); r.Status != 503 {
					t.Fatalf("fifth request, critical: %s, want 503 at the limit", r)
				}
			}
			for _, h := range hs {
				finish(t, gt, h)
			}
			s := adaptiveState(t, g)
			if s.InFlight != 0 {
				t.Fatalf("after every request ended: %+v, want none in flight", s)
			}
			if s.Shed["normal"] == 0 {
				t.Fatalf("shed counts %v, want the normal 503 counted", s.Shed)
			}
			m := scrape(t, g, "")
			if f := m.family("tollgate_adaptive_shed_total", `limit="up"`, `priority="normal"`); len(f) != 1 {
				t.Errorf("/metrics: shed series %v, want one for normal\n%v", f, m.family("tollgate_adaptive_shed_total"))
			}
			if f := m.family("tollgate_adaptive_limit", `limit="up"`); len(f) != 1 {
				t.Errorf("/metrics: learned limit series %v\n%v", f, m)
			} else {
				for _, v := range f {
					if v != 4 {
						t.Errorf("/metrics: learned limit %v, want 4 (pinned)", v)
					}
				}
			}
			if f := m.family("http_server_request_duration_seconds_count", `tollgate_outcome="shed"`); len(f) == 0 {
				t.Errorf("/metrics: no request counted with outcome shed\n%v", m.family("http_server_request_duration_seconds_count"))
			}
		})
	}
}

// TestAdaptiveCandidate: a candidate configuration with an adaptive limit
// (pinned at 2) beside a live one without: with two requests held at the
// upstream, a third is forwarded by the live configuration and reported
// as one the candidate would have shed.
func TestAdaptiveCandidate(t *testing.T) {
	const token = "cand-secret"
	gt := newGate(t)
	live := fmt.Sprintf(`[[routes]]
name = "all"
path_prefix = "/"
upstream = %q
`, gt.URL)
	next := filepath.Join(t.TempDir(), "next.toml")
	if err := os.WriteFile(next, []byte(adaptiveBody(gt.URL, "min_in_flight = 2\nmax_in_flight = 2")), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": "", "Body": live},
		Env: []string{"TG_CAND_TOKEN=" + token}, Args: []string{"--candidate", next}})
	url := g.url("/x")
	h1 := holdAdmitted(t, gt, url, "cand-1", nil)
	h2 := holdAdmitted(t, gt, url, "cand-2", nil)
	if r := do(t, http.DefaultClient, "GET", url, nil); r.Status != 200 {
		t.Fatalf("third request: %s, want 200: a candidate never changes an answer", r)
	}
	finish(t, gt, h1)
	finish(t, gt, h2)
	var rep candidateReport
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := adminDo(t, g, "GET", "/admin/candidate", token)
		if r.Status != 200 {
			t.Fatalf("GET /admin/candidate: %s", r)
		}
		rep = candidateReport{}
		if err := json.Unmarshal(r.Body, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Requests >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rep.Requests != 3 || rep.ExtraDenials != 1 || rep.Limits["up"].ExtraDenials != 1 {
		t.Fatalf("report %+v: want 3 requests, 1 the candidate's adaptive limit \"up\" would have shed", rep)
	}
}

// TestAdaptiveHostile: what a client may send as its priority, at a limit
// pinned at 2 with reserve 0.5 (normal and sheddable requests: 1 in
// flight; critical: 2) and one normal request held: only a believed
// "critical" (any case, from a trusted peer) takes the reserved slot;
// every other spelling is normal and shed, without error.
func TestAdaptiveHostile(t *testing.T) {
	gt := newGate(t)
	g := startGateway(t, "adaptive.toml.tmpl", gwOpts{Data: map[string]any{
		"Body": adaptiveBody(gt.URL, `min_in_flight = 2
max_in_flight = 2
reserve = 0.5
priority_header = "X-Priority"
priority_trusted_from = ["127.0.0.0/8", "::1/128"]`)}})
	url := g.url("/x")
	h := holdAdmitted(t, gt, url, "hostile-held", nil)
	defer finish(t, gt, h)
	for _, tc := range []struct {
		name   string
		values []string
		want   int
	}{
		{"critical", []string{"critical"}, 200},
		{"upper case", []string{"CRITICAL"}, 200},
		{"padded", []string{"  critical\t"}, 200},
		{"sent twice", []string{"critical", "critical"}, 503},
		{"list in one field", []string{"critical, critical"}, 503},
		{"unknown class", []string{"urgent"}, 503},
		{"empty", []string{""}, 503},
		{"8 KiB", []string{strings.Repeat("critical", 1024)}, 503},
		{"sheddable", []string{"sheddable"}, 503},
	} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header["X-Priority"] = tc.values
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			// Go's client refuses to send some bytes (NUL): nothing
			// reached the gateway.
			t.Logf("%s: not sent: %v", tc.name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: X-Priority %q answered %d, want %d", tc.name, tc.values, resp.StatusCode, tc.want)
		}
	}
}
