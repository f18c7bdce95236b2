package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// responseBound is the longest any response may take while Redis is down
// or hung: store.timeout (100ms) plus a generous margin. It only catches
// hangs; it measures nothing.
const responseBound = 2 * time.Second

// faultGateway is one gateway of TestRedisOnError with its on_error policy
// and its own key prefix.
type faultGateway struct {
	onError, prefix string
	g               *gw
	path            string // the route waitRedisDecides requests
}

// TestRedisOnError: with its Redis killed, and
// then hung with SIGSTOP, each on_error policy does what the README says, and
// answers every request within responseBound: "local" keeps enforcing the
// same limit (3/hour) on the node's own counters, "allow" forwards without
// rate-limit headers, "deny" answers 503 with Retry-After and a problem
// body. /readyz reports the store unavailable (and not ready only for
// "deny"). When Redis comes back (restarted empty, or resumed), every
// gateway decides in Redis again within a bounded poll.
func TestRedisOnError(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("three", "3/hour", "sliding_window_log", "client") + routeTOML("f", "/f", "three")
	var gws []*faultGateway
	for _, mode := range []string{"local", "allow", "deny"} {
		data := redisData(rs.Addr, nil, mode, "100ms", body)
		data["Prefix"] = "tg-" + mode + ":"
		gws = append(gws, &faultGateway{onError: mode, prefix: "tg-" + mode + ":", path: "/f",
			g: startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})})
	}
	faults := []struct {
		name            string
		inject, recover func()
	}{
		{"killed", rs.Kill, rs.Restart},
		{"hung", rs.Pause, rs.Resume},
	}
	for fi, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			// Healthy first: decided in Redis, with headers. A bounded
			// poll, not one request: the first decision after a start
			// loads the script (NOSCRIPT, then EVAL) and may exceed the
			// 100 ms budget on a loaded machine, which is not the fault
			// under test.
			for gi, fg := range gws {
				waitRedisDecides(t, rs, fg, fmt.Sprintf("127.0.%d.%d", 30+fi, gi+1))
			}
			f.inject()
			recovered := false
			defer func() {
				if !recovered {
					f.recover()
				}
			}()
			for gi, fg := range gws {
				c := newClient(t, fmt.Sprintf("127.0.%d.%d", 10+fi, 2+gi))
				var got []string
				for i := 0; i < 5; i++ {
					start := time.Now()
					r, err := tryDo(c, "GET", fg.g.url("/f"), nil, nil)
					took := time.Since(start)
					if err != nil {
						t.Fatalf("%s, Redis %s: request %d: %v", fg.onError, f.name, i, err)
					}
					if took > responseBound {
						t.Errorf("%s, Redis %s: request %d took %v (bound %v)", fg.onError, f.name, i, took, responseBound)
					}
					got = append(got, fmt.Sprint(r.Status))
					checkDegraded(t, fg.onError, i, r)
				}
				t.Logf("%s, Redis %s: statuses %s", fg.onError, f.name, strings.Join(got, " "))
				rd := readyz(t, fg.g)
				if rd.Store != "unavailable" || rd.Ready != (fg.onError != "deny") {
					t.Errorf("%s, Redis %s: /readyz store %q ready %v, want unavailable, ready %v",
						fg.onError, f.name, rd.Store, rd.Ready, fg.onError != "deny")
				}
			}
			f.recover()
			recovered = true
			for gi, fg := range gws {
				waitRedisDecides(t, rs, fg, fmt.Sprintf("127.0.%d.%d", 20+fi, gi+1))
			}
		})
	}
}

// checkDegraded checks response i (0-based) of a fresh client while the
// store is failing, for on_error mode.
func checkDegraded(t *testing.T, mode string, i int, r *response) {
	t.Helper()
	switch mode {
	case "local":
		if i < 3 {
			if r.Status != 200 || r.Header.Get("RateLimit") == "" {
				t.Errorf("local, request %d: %s, want 200 with RateLimit from local counters", i, r)
			}
			return
		}
		check429Body(t, r, "three")
		if ra, ok := r.retryAfter(t); !ok || ra < 1 {
			t.Errorf("local, request %d: Retry-After %d (present %v), want ≥ 1", i, ra, ok)
		}
	case "allow":
		if r.Status != 200 {
			t.Errorf("allow, request %d: %s, want 200", i, r)
		}
		for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("allow, request %d: %s: %q, want no rate-limit headers", i, h, v)
			}
		}
	case "deny":
		r.problem(t, http.StatusServiceUnavailable)
		if ra, ok := r.retryAfter(t); !ok || ra < 1 {
			t.Errorf("deny, request %d: Retry-After %d (present %v), want ≥ 1", i, ra, ok)
		}
	}
}

// waitRedisDecides polls (bounded) until fg's gateway reports its store ok
// and a request from srcIP is decided in Redis: it carries rate-limit
// headers and its counter key appears under fg's prefix.
func waitRedisDecides(t *testing.T, rs *redistest.Server, fg *faultGateway, srcIP string) {
	t.Helper()
	const within = 15 * time.Second
	c := newClient(t, srcIP)
	deadline := time.Now().Add(within)
	var last string
	for {
		rd := readyz(t, fg.g)
		if rd.Store == "ok" {
			before := countKeys(t, rs, fg.prefix)
			r := get(t, c, fg.g.url(fg.path), nil)
			after := countKeys(t, rs, fg.prefix)
			if r.Status == 200 && r.Header.Get("RateLimit") != "" && after > before {
				return
			}
			last = fmt.Sprintf("response %d, keys under %s %d → %d", r.Status, fg.prefix, before, after)
		} else {
			last = "/readyz store " + rd.Store
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not deciding in Redis %v after it came back: %s", fg.onError, within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countKeys counts the keys under prefix (KEYS: test databases are small).
func countKeys(t testing.TB, rs *redistest.Server, prefix string) int {
	t.Helper()
	v, err := rs.Do("KEYS", prefix+"*")
	if err != nil {
		t.Fatalf("KEYS %s*: %v", prefix, err)
	}
	l, _ := v.([]any)
	return len(l)
}

// loadResult tallies a load run.
type loadResult struct {
	mu   sync.Mutex
	got  statuses
	errs []error
	// wait returns once every worker has stopped (after stop is closed).
	wait func()
}

func (l *loadResult) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.got.String()
	if len(l.errs) > 0 {
		s += fmt.Sprintf(", %d transport errors (first: %v)", len(l.errs), l.errs[0])
	}
	return s
}

// fiveXX counts 5xx responses and transport errors.
func (l *loadResult) fiveXX() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.errs)
	for s, c := range l.got {
		if s >= 500 {
			n += c
		}
	}
	return n
}

// load sends requests to url from workers clients, rotating API keys over
// keys values, until stop is closed; res.wait waits for the workers.
func load(t testing.TB, url string, workers, keys int, stop <-chan struct{}) *loadResult {
	t.Helper()
	res := &loadResult{got: statuses{}}
	var wg sync.WaitGroup
	// Workers also stop when the test ends, so a test that fails before
	// closing stop leaves none running into the next test.
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended); wg.Wait() })
	var seq atomic.Int64
	for w := 0; w < workers; w++ {
		c := newClient(t, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-ended:
					return
				default:
				}
				k := fmt.Sprintf("load-%d", seq.Add(1)%int64(keys))
				r, err := tryDo(c, "GET", url, map[string]string{"X-API-Key": k}, nil)
				res.mu.Lock()
				if err != nil {
					res.errs = append(res.errs, err)
				} else {
					res.got[r.Status]++
				}
				res.mu.Unlock()
			}
		}()
	}
	res.wait = wg.Wait
	return res
}
