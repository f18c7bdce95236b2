package e2e

import (
	"testing"
	"time"
)

// TestBurstExactlyTheLimit (one node): 1,000 concurrent
// requests on one key with a limit of 10 admit exactly 10; the other 990
// are 429 with Retry-After ≥ 1.
func TestBurstExactlyTheLimit(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"sliding_window_log", "fixed_window"} {
		t.Run(alg, func(t *testing.T) {
			g := startGateway(t, "burst.toml.tmpl", gwOpts{Data: map[string]any{"Rate": "10/hour", "Algorithm": alg}})
			const n = 1000
			avoidWindowEdge(time.Hour)
			burst(n, []string{g.url("/burst")}, nil).check(t, n, 10)
		})
	}
}

// TestSustainedTwiceTheLimit: a client sending at twice the limit (10/s
// against 5/1s) for 4 s is admitted at most what each algorithm promises
// (the log: at most 5 in any second; fixed_window and the counter: at most
// 5 per aligned second), and is never locked out: rejected requests
// consume nothing, so every second admits some.
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
			// The gateway decided each admitted request at some instant of
			// [send, recv] on the machine's one wall clock: the bounds
			// below hold for every such instant.
			type span struct{ send, recv time.Time }
			var ok []span
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for range tick.C {
				sent := time.Since(start)
				if sent >= duration {
					break
				}
				sendAt := time.Now()
				r, err := tryDo(c, "GET", g.url("/burst"), nil, nil)
				if err != nil {
					t.Fatalf("request at %v: %v", sent, err)
				}
				recvAt := time.Now()
				offered++
				switch r.Status {
				case 200:
					admitted++
					perSecond[int(sent/time.Second)]++
					ok = append(ok, span{sendAt, recvAt})
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
			t.Logf("%s: offered %d, admitted %d in %.1fs, per second %v", alg, offered, admitted, secs, perSecond)
			if admitted < lo {
				t.Errorf("admitted %d of %d in %.1fs at 2× a limit of %d/s, want at least %d (lock-out?)", admitted, offered, secs, limit, lo)
			}
			if len(ok) == 0 {
				return
			}
			// Upper bounds, as tight as each algorithm promises.
			const W = time.Second
			first, last := ok[0].send, ok[len(ok)-1].recv
			switch alg {
			case "sliding_window_log":
				// Exact: no interval (g−W, g] holds more than L. Requests
				// sent after recv_i − W were surely decided inside
				// (g_i − W, g_i].
				for i := range ok {
					n := 0
					for j := 0; j <= i; j++ {
						if ok[j].send.After(ok[i].recv.Add(-W)) {
							n++
						}
					}
					if n > limit {
						t.Errorf("%d admitted within one second ending at request %d, limit %d", n, i, limit)
					}
				}
				// And in total at most L per W of the span they cover.
				if hi := limit * int((last.Sub(first)+W-1)/W); admitted > hi {
					t.Errorf("admitted %d in %v, more than %d per second (%d)", admitted, last.Sub(first), limit, hi)
				}
			default:
				// fixed_window counts per aligned window; the counter's
				// estimate is at least its current window's count (no
				// precision: one bucket per window). So: at most L in each
				// aligned second of Unix time.
				windows := int(last.UnixNano()/int64(W)-first.UnixNano()/int64(W)) + 1
				if hi := limit * windows; admitted > hi {
					t.Errorf("admitted %d over %d aligned windows, more than %d each (%d)", admitted, windows, limit, hi)
				}
				perWindow := map[int64]int{}
				for _, s := range ok {
					if k := s.send.UnixNano() / int64(W); k == s.recv.UnixNano()/int64(W) {
						perWindow[k]++
					}
				}
				for k, n := range perWindow {
					if n > limit {
						t.Errorf("aligned window %d: %d admitted, limit %d", k, n, limit)
					}
				}
			}
			for s, n := range perSecond {
				if n == 0 {
					t.Errorf("second %d: nothing admitted (lock-out); per second %v", s, perSecond)
				}
			}
		})
	}
}
