package e2e

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestBurstExactlyTheLimit (SCENARIOS 45, one node): 1,000 concurrent
// requests on one key with a limit of 10 admit exactly 10; the other 990
// are 429 with Retry-After ≥ 1.
func TestBurstExactlyTheLimit(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"sliding_window_log", "fixed_window"} {
		t.Run(alg, func(t *testing.T) {
			g := startGateway(t, "burst.toml.tmpl", gwOpts{Data: map[string]any{"Rate": "10/hour", "Algorithm": alg}})
			const n = 1000
			tr := &http.Transport{
				DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
				MaxIdleConnsPerHost: n,
			}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			avoidWindowEdge(time.Hour)
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				got   = statuses{}
				errs  []error
				badRA int
			)
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := tryDo(c, "GET", g.url("/burst"), nil, nil)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
						return
					}
					got[r.Status]++
					if r.Status == http.StatusTooManyRequests {
						if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
							badRA++
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Errorf("%d requests failed; first: %v", len(errs), errs[0])
			}
			if got[200] != 10 || got[429] != n-10 {
				t.Errorf("statuses %s, want exactly 10×200 and %d×429", got, n-10)
			}
			if badRA > 0 {
				t.Errorf("%d denials without a Retry-After ≥ 1", badRA)
			}
		})
	}
}

// TestSustainedTwiceTheLimit (SCENARIOS 46): a client sending at twice the
// limit (10/s against 5/1s) for 4 s gets about 5 per second admitted, with
// no lock-out: rejected requests consume nothing.
func TestSustainedTwiceTheLimit(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"sliding_window_log", "fixed_window", "sliding_window_counter"} {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, "burst.toml.tmpl", gwOpts{Data: map[string]any{"Rate": "5/1s", "Algorithm": alg}})
			c := newClient(t, "")
			const (
				limit    = 5
				duration = 4 * time.Second
				interval = 100 * time.Millisecond
			)
			start := time.Now()
			perSecond := make([]int, int(duration/time.Second))
			offered, admitted := 0, 0
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for range tick.C {
				sent := time.Since(start)
				if sent >= duration {
					break
				}
				r, err := tryDo(c, "GET", g.url("/burst"), nil, nil)
				if err != nil {
					t.Fatalf("request at %v: %v", sent, err)
				}
				offered++
				switch r.Status {
				case 200:
					admitted++
					perSecond[int(sent/time.Second)]++
				case 429:
				default:
					t.Fatalf("request at %v: %s", sent, r)
				}
			}
			elapsed := time.Since(start)
			if elapsed > 6*time.Second {
				t.Errorf("4 s of traffic took %v", elapsed)
			}
			secs := elapsed.Seconds()
			lo := int(0.6 * float64(min(limit*int(secs), offered/2+1)))
			hi := limit * (int(secs) + 2)
			t.Logf("%s: offered %d, admitted %d in %.1fs, per second %v", alg, offered, admitted, secs, perSecond)
			if admitted < lo || admitted > hi {
				t.Errorf("admitted %d of %d in %.1fs at 2× a limit of %d/s, want %d..%d", admitted, offered, secs, limit, lo, hi)
			}
			for s, n := range perSecond {
				if n == 0 {
					t.Errorf("second %d: nothing admitted (lock-out); per second %v", s, perSecond)
				}
			}
		})
	}
}
