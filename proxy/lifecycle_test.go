package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestConcurrencySlotReleased checks that a concurrency slot comes back
// whatever ends the request: success, upstream failure, route timeout,
// the upstream cutting the body, the client hanging up.
func TestConcurrencySlotReleased(t *testing.T) {
	release := make(chan struct{})
	var slowSeen atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if strings.HasPrefix(path, "/slow") {
			path = "/slow"
			slowSeen.Add(1)
		}
		switch path {
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-release:
			case <-time.After(10 * time.Second):
			}
		case "/cut":
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "/fail":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			fmt.Fprint(w, "ok")
		}
	})
	p := compile(t, func(c *config.Config) {
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.MaxInFlight, l.By = "one-at-a-time", "concurrency", 1, []string{}
		c.Limits = []config.LimitConfig{l}
		fast := route("fast", "/", up.URL, "one-at-a-time")
		timed := route("timed", "/slow/timeout", up.URL, "one-at-a-time")
		timed.Timeout = "100ms"
		c.Routes = []config.RouteConfig{fast, timed}
	})
	store := memstore.New(memstore.Options{})
	h, err := proxy.New(p, proxy.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	admitted := func(step string) {
		t.Helper()
		if resp := get(t, gw.URL+"/ok"); resp.StatusCode != 200 {
			t.Fatalf("after %s: status %d, want 200 (slot not released)", step, resp.StatusCode)
		}
	}

	admitted("nothing")
	if resp := get(t, gw.URL+"/fail"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("/fail: status %d, want 502", resp.StatusCode)
	}
	admitted("upstream failure (502)")
	if resp := get(t, gw.URL+"/slow/timeout"); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("/slow/timeout: status %d, want 504", resp.StatusCode)
	}
	admitted("route timeout (504)")
	if resp, err := http.Get(gw.URL + "/cut"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	admitted("upstream cutting the body (handler aborted by panic)")

	// A slow request holds the slot: a second one is denied meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/slow", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	slowBefore := slowSeen.Load()
	waitFor(t, "the slow request to reach the upstream", func() bool { return slowSeen.Load() > slowBefore })
	if resp := get(t, gw.URL+"/ok"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("while the slow request holds the slot: status %d, want 429", resp.StatusCode)
	}
	cancel() // the client hangs up mid-request
	<-done
	waitFor(t, "the slot to come back after the client hung up", func() bool {
		return get(t, gw.URL+"/ok").StatusCode == 200
	})
	close(release)
}

// TestAbortedResponseRunsEveryDefer: when the upstream cuts a response
// body, ReverseProxy aborts the handler by panicking (http.ErrAbortHandler)
// through proceed, serve and ServeHTTP; every deferred step still runs
// once: the concurrency slot comes back, the response is counted, the
// observer records the request and the candidate decides it.
func TestAbortedResponseRunsEveryDefer(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cut" {
			fmt.Fprint(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	p := compile(t, func(c *config.Config) {
		conc := config.DefaultLimit()
		conc.Name, conc.Algorithm, conc.MaxInFlight, conc.By = "one-at-a-time", "concurrency", 1, []string{}
		resp := limit("by-response", "fixed_window", "2/1h")
		resp.Count = "response"
		c.Limits = []config.LimitConfig{conc, resp}
		c.Routes = []config.RouteConfig{route("api", "/", up.URL, "one-at-a-time", "by-response")}
	})
	rec := &recorder{}
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	var candidates atomic.Int64
	h.SetCandidate(&proxy.Candidate{Policy: p, Store: memstore.New(memstore.Options{}),
		Record: func(*proxy.CandidateOutcome) { candidates.Add(1) }})
	gw := gateway(t, h)
	if resp, err := http.Get(gw.URL + "/cut"); err == nil {
		if _, err := io.Copy(io.Discard, resp.Body); err == nil {
			t.Error("the cut body read to its end")
		}
		resp.Body.Close()
	}
	waitFor(t, "the aborted request's event", func() bool { return rec.count(proxy.OutcomeUpstreamError) == 1 })
	waitFor(t, "the aborted request's candidate decision", func() bool { return candidates.Load() == 1 })
	// The slot is free and the cut response counted one of two.
	if resp := get(t, gw.URL+"/ok"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the aborted request: status %d, want 200", resp.StatusCode)
	}
	if resp := get(t, gw.URL+"/ok"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429 (the cut response not counted)", resp.StatusCode)
	}
	waitFor(t, "every event", func() bool { return rec.count(proxy.OutcomeForwarded)+rec.count(proxy.OutcomeLimited) == 2 })
	if n := rec.count(proxy.OutcomeUpstreamError); n != 1 {
		t.Errorf("%d upstream_error events, want 1", n)
	}
	if n := candidates.Load(); n != 3 {
		t.Errorf("candidate decided %d requests, want 3", n)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		fmt.Fprint(w, "ok")
	})
	p := compile(t, func(c *config.Config) {
		c.Limits = []config.LimitConfig{limit("api", "token_bucket", "50/second")}
		c.Routes = []config.RouteConfig{route("api", "/", up.URL, "api")}
	})
	gw := serveMemory(t, p)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	run := func() {
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := "/ok"
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if i%5 == 0 {
					path = "/slow"
					time.AfterFunc(20*time.Millisecond, cancel)
				}
				req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+path, nil)
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		client.CloseIdleConnections()
	}
	run() // warm up pools and idle connections
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	run()
	// Connections wind down asynchronously; poll until the count settles.
	deadline := time.Now().Add(10 * time.Second)
	for {
		client.CloseIdleConnections()
		after := runtime.NumGoroutine()
		if after <= before+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
