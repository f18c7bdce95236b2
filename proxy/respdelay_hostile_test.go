package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestResponseAndDelayHostile: what a client (or a misbehaving upstream)
// could do to dodge a limit that counts by response or delays, or to make
// the gateway spend memory or goroutines on it. Each row names the move
// and checks the defined outcome.
func TestResponseAndDelayHostile(t *testing.T) {
	var slowHits atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login/slow":
			slowHits.Add(1)
			time.Sleep(150 * time.Millisecond)
			w.WriteHeader(http.StatusUnauthorized)
		case "/units/dup":
			w.Header()["X-Units"] = []string{"1", "9"}
		case "/units/neg":
			w.Header().Set("X-Units", "-9")
		case "/units/huge":
			w.Header().Set("X-Units", "9007199254740992")
		case "/units/five":
			w.Header().Set("X-Units", "5")
		}
		fmt.Fprint(w, "ok")
	})
	p := compile(t, func(c *config.Config) {
		login := limit("login", "fixed_window", "3/1h")
		login.By, login.Count, login.CountStatuses = []string{"ip"}, "response", []string{"400-499"}
		units := limit("units", "fixed_window", "20/1h")
		units.By, units.Count, units.CostResponseHeader = []string{"header:X-Client"}, "response", "X-Units"
		gone := limit("gone", "fixed_window", "2/1h")
		gone.By, gone.Count = []string{"ip"}, "response"
		// A slot a minute: no waiter is served while the test runs,
		// so the waiting room stays full (at one a second, each waiter
		// served let a later request wait instead of being refused, and
		// under load fewer than 180 were refused).
		queue := limit("queue", "token_bucket", "1/1m")
		queue.By, queue.OnLimit, queue.MaxDelay, queue.MaxWaiting = []string{}, "delay", "1h", 20
		queue.Burst = 1
		c.Limits = []config.LimitConfig{login, units, gone, queue}
		c.Routes = []config.RouteConfig{
			route("login", "/login", up.URL, "login"),
			route("units", "/units", up.URL, "units"),
			route("gone", "/gone", "http://127.0.0.1:1", "gone"),
			route("queue", "/queue", up.URL, "queue"),
		}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	remaining := func(resp *http.Response) string {
		v := resp.Header.Get("RateLimit")
		i := strings.Index(v, ";r=")
		if i < 0 {
			return "?"
		}
		return strings.SplitN(v[i+3:], ";", 2)[0]
	}

	t.Run("client hangs up before a failed login is answered: still counted", func(t *testing.T) {
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/login/slow", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatal("answered before the upstream's 150ms")
			}
			cancel()
		}
		waitFor(t, "three upstream answers", func() bool { return slowHits.Load() == 3 })
		time.Sleep(300 * time.Millisecond) // each answer comes 150ms after its arrival; the count at once
		if resp := get(t, gw.URL+"/login/slow"); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("fourth attempt: %d, want 429", resp.StatusCode)
		}
		if n := slowHits.Load(); n != 3 {
			t.Fatalf("the upstream saw %d attempts, want 3", n)
		}
	})
	t.Run("client sends the response cost header itself: ignored", func(t *testing.T) {
		get(t, gw.URL+"/units/five", "X-Client", "a", "X-Units", "0")
		if resp := get(t, gw.URL+"/units/five", "X-Client", "a", "X-Units", "0"); remaining(resp) != "15" {
			t.Fatalf("remaining %s after one response of 5 units, want 15", remaining(resp))
		}
	})
	for _, tc := range []struct{ path, want string }{
		{"/units/dup", "19"}, // sent twice: the request's cost
		{"/units/neg", "19"}, // negative: the request's cost
		{"/units/huge", "0"}, // 2^53: capped at the capacity, 20
	} {
		t.Run("upstream sends cost "+tc.path, func(t *testing.T) {
			client := tc.path
			resp := get(t, gw.URL+tc.path, "X-Client", client)
			if resp.Header.Get("X-Units") != "" {
				t.Fatalf("the response cost header reached the client")
			}
			if r := remaining(get(t, gw.URL+"/units/none", "X-Client", client)); r != tc.want {
				t.Fatalf("remaining %s, want %s", r, tc.want)
			}
		})
	}
	t.Run("upstream unreachable: the gateway's own 502 is not the upstream's answer", func(t *testing.T) {
		for range 4 {
			if resp := get(t, gw.URL+"/gone"); resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502", resp.StatusCode)
			}
		}
	})
	t.Run("200 would-be waiters: max_waiting wait, the rest 429 at once, nothing left behind", func(t *testing.T) {
		if resp := get(t, gw.URL+"/queue"); resp.StatusCode != 200 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		id := p.Routes[3].Limits[0].ID
		ctx, cancel := context.WithCancel(context.Background())
		tr := &http.Transport{MaxConnsPerHost: 0}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var rejected, other atomic.Int64
		start := time.Now()
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/queue", nil)
				resp, err := client.Do(req)
				if err != nil {
					return // hung up while waiting
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					rejected.Add(1)
				} else {
					other.Add(1)
				}
			}()
		}
		waitFor(t, "180 rejections", func() bool { return rejected.Load() >= 180 })
		// A refused request that had waited would have waited for a slot
		// a minute away.
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the rejections took %v: they must come at once, not after a wait", took)
		}
		if n := h.Waiting(id); n != 20 {
			t.Fatalf("%d waiting, want max_waiting = 20", n)
		}
		cancel()
		wg.Wait()
		waitFor(t, "no waiter left", func() bool { return h.Waiting(id) == 0 })
		if other.Load() != 0 {
			t.Fatalf("%d requests got another answer", other.Load())
		}
	})
}

// TestDelayWithResponseCount: a request under both a limit that counts by
// response (whose upstream exchange the client cannot cancel) and a delay
// limit still stops waiting, and gives its slot back, when the client
// goes away.
func TestDelayWithResponseCount(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *config.Config) {
		resp := limit("resp", "fixed_window", "100/1h")
		resp.Count = "response"
		del := limit("del", "token_bucket", "1/1s")
		del.By, del.OnLimit, del.MaxDelay, del.Burst = []string{}, "delay", "10s", 1
		c.Limits = []config.LimitConfig{resp, del}
		c.Routes = []config.RouteConfig{route("both", "/", up.URL, "resp", "del")}
	})
	rec := &recorder{}
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	if resp := get(t, gw.URL+"/x"); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/x", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("answered before its slot")
	}
	deadline := time.Now().Add(700 * time.Millisecond) // the slot is 1s away
	for rec.count(proxy.OutcomeCanceled) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the request kept waiting after its client left (forwarded: %d)", rec.count(proxy.OutcomeForwarded))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := up.hits.Load(); n != 1 {
		t.Fatalf("the upstream saw %d requests, want 1", n)
	}
}
