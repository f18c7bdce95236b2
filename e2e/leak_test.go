package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

// leakSlack is how many goroutines or fds above the idle baseline still
// count as flat (a timer or a pooled connection in transition).
const leakSlack = 3

// TestNoLeakAfterMixedBurst (seen from outside the
// process): the gateway's goroutines (/debug/pprof/goroutine on the admin
// listener) and open file descriptors (/proc/<pid>/fd) return to their
// idle baseline after rounds of allowed, denied, upstream-500, reset,
// unreachable-upstream, upstream-timeout and client-disconnect requests
// with SIGHUP reloads in between. Connections are closed on both sides
// before each reading, so only leaked goroutines and fds remain.
func TestNoLeakAfterMixedBurst(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	data := map[string]any{"Upstream": up.URL, "Down": closedAddr(t), "Body": "r0"}
	g := startGateway(t, "leak.toml.tmpl", gwOpts{Data: data})
	pc := &probe.Client{PID: g.cmd.Process.Pid, Admin: g.Admin}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32,
	}
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	quiesce := func() {
		tr.CloseIdleConnections()
		up.CloseClientConnections() // the gateway's pooled upstream connections
	}

	// Warm up (pools, caches, the metrics and pprof handlers), then take
	// the idle baseline once it holds still.
	mixedRound(t, g, c, 0)
	quiesce()
	before := steady(t, pc)

	for round := 1; round <= 3; round++ {
		mixedRound(t, g, c, round)
		// A reload between rounds, waited for through /readyz.
		g.rewrite(t, map[string]any{"Body": fmt.Sprintf("r%d", round)})
		g.signal(t, syscall.SIGHUP)
	}
	waitReloaded(t, g, "r3")
	quiesce()

	deadline := time.Now().Add(15 * time.Second)
	var after probe.Sample
	for {
		var err error
		after, err = pc.Sample(context.Background())
		if err != nil {
			t.Fatalf("sample: %v", err)
		}
		if after.Goroutines <= before.Goroutines+leakSlack && after.FDs <= before.FDs+leakSlack {
			break
		}
		if time.Now().After(deadline) {
			dump, _ := tryDo(&http.Client{Timeout: 5 * time.Second}, "GET", g.adminURL("/debug/pprof/goroutine?debug=1"), nil, nil)
			t.Fatalf("not flat 15s after the burst: goroutines %d → %d, fds %d → %d (slack %d)\n%s",
				before.Goroutines, after.Goroutines, before.FDs, after.FDs, leakSlack, dump.Body)
		}
		quiesce()
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("idle baseline: goroutines %d, fds %d; after 3 mixed rounds and 3 reloads: goroutines %d, fds %d",
		before.Goroutines, before.FDs, after.Goroutines, after.FDs)
}

// mixedRound sends one round of every kind of request, 8 of each kind at
// once, and checks each status.
func mixedRound(t *testing.T, g *gw, c *http.Client, round int) {
	t.Helper()
	kinds := []struct {
		path   string
		hdr    map[string]string
		want   int // 0: the client hangs up first
		hangUp time.Duration
	}{
		{"/ok/a", nil, 200, 0},
		{"/denied", map[string]string{"X-API-Key": fmt.Sprintf("denied-%d", round)}, 0, 0},
		{"/ok/fail", map[string]string{hStatus: "500"}, 500, 0},
		{"/ok/reset", map[string]string{hReset: "1"}, 502, 0},
		{"/down", nil, 502, 0},
		{"/slow", map[string]string{hSleep: "2s"}, 504, 0},
		{"/ok/hang", map[string]string{hSleep: "2s"}, 0, 50 * time.Millisecond},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	for _, k := range kinds {
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if k.hangUp > 0 {
					ctx, cancel = context.WithTimeout(ctx, k.hangUp)
					defer cancel()
				}
				req, _ := http.NewRequestWithContext(ctx, "GET", g.url(k.path), nil)
				for h, v := range k.hdr {
					req.Header.Set(h, v)
				}
				resp, err := c.Do(req)
				var problem string
				switch {
				case k.hangUp > 0:
					if err == nil {
						resp.Body.Close()
						problem = fmt.Sprintf("%s: answered %d before the client hung up", k.path, resp.StatusCode)
					}
				case err != nil:
					problem = fmt.Sprintf("%s: %v", k.path, err)
				default:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if k.want == 0 && resp.StatusCode != 200 && resp.StatusCode != 429 ||
						k.want != 0 && resp.StatusCode != k.want {
						problem = fmt.Sprintf("%s: status %d, want %d", k.path, resp.StatusCode, k.want)
					}
				}
				if problem != "" {
					mu.Lock()
					problems = append(problems, problem)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, p := range problems {
		t.Errorf("round %d: %s", round, p)
	}
}

// steady samples until two readings 200 ms apart agree on goroutines and
// fds (bounded), and returns the last.
func steady(t *testing.T, pc *probe.Client) probe.Sample {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	prev, err := pc.Sample(context.Background())
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	for {
		time.Sleep(200 * time.Millisecond)
		s, err := pc.Sample(context.Background())
		if err != nil {
			t.Fatalf("sample: %v", err)
		}
		if s.Goroutines == prev.Goroutines && s.FDs == prev.FDs || time.Now().After(deadline) {
			return s
		}
		prev = s
	}
}

// waitReloaded polls (bounded) until /denied answers with body.
func waitReloaded(t *testing.T, g *gw, body string) {
	t.Helper()
	c := newClient(t, "127.0.40.1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := get(t, c, g.url("/denied"), map[string]string{"X-API-Key": "reload-probe-" + time.Now().String()})
		if r.Status == 200 && string(r.Body) == body {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reload to %q never took effect: %s", body, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveHeap returns g's live heap in bytes right after a forced collection
// (a heap profile with gc=1 runs one).
func liveHeap(t testing.TB, g *gw) int64 {
	t.Helper()
	if _, err := tryDo(&http.Client{Timeout: 10 * time.Second}, "GET", g.adminURL("/debug/pprof/heap?gc=1"), nil, nil); err != nil {
		t.Fatalf("forced GC: %v", err)
	}
	alloc, _, err := (&probe.Client{PID: g.cmd.Process.Pid, Admin: g.Admin}).Heap(context.Background())
	if err != nil {
		t.Fatalf("heap: %v", err)
	}
	return alloc
}

// heapSlack is how far the live heap, after a forced GC, may stand above
// its baseline after 8,000 more requests on the same keys. A leak of 64
// bytes per request would exceed it; buffers pooled between requests and
// the runtime's own bookkeeping stay well below it.
const heapSlack = 512 << 10

// TestHeapFlatUnderRepeatedRequests: requests that create no new state
// (four clients, already counted, allowed and denied) leave the gateway's
// live heap where it was. The goroutine and fd check above cannot see a
// leak that keeps no goroutine or descriptor; this one bounds bytes.
func TestHeapFlatUnderRepeatedRequests(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "leak.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL, "Down": closedAddr(t), "Body": "r0"}})
	pc := &probe.Client{PID: g.cmd.Process.Pid, Admin: g.Admin}
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	phase := func(n int) {
		var wg sync.WaitGroup
		var failed sync.Once
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n / 8 {
					path := "/ok/a"
					if i%2 == 1 {
						path = "/denied"
					}
					r, err := tryDo(c, "GET", g.url(path), map[string]string{"X-API-Key": fmt.Sprintf("heap-%d", (w+i)%4)}, nil)
					if err != nil || r.Status != 200 && r.Status != 429 {
						failed.Do(func() { t.Errorf("%s: %v %v", path, r, err) })
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	// The live heap after a forced GC (a heap profile with gc=1 runs one).
	heap := func() int64 {
		var alloc int64
		for range 2 {
			if _, err := tryDo(&http.Client{Timeout: 10 * time.Second}, "GET", g.adminURL("/debug/pprof/heap?gc=1"), nil, nil); err != nil {
				t.Fatalf("forced GC: %v", err)
			}
			var err error
			if alloc, _, err = pc.Heap(context.Background()); err != nil {
				t.Fatalf("heap: %v", err)
			}
		}
		return alloc
	}
	phase(2000) // warm up: pools, keys, metric series
	before := heap()
	phase(8000)
	after := heap()
	t.Logf("live heap after warm-up %d B, after 8000 more requests %d B (%+d B)", before, after, after-before)
	if after > before+heapSlack {
		t.Errorf("live heap grew by %d B over 8000 requests that create no state (bound %d B)", after-before, heapSlack)
	}
}
