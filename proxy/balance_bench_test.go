package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/testupstream"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// stubTransport answers every request at once, with 503 for the hosts in
// unavailable and 200 otherwise: the gateway's own cost, with no network.
type stubTransport struct{ unavailable map[string]bool }

func (s *stubTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	status := http.StatusOK
	if s.unavailable[r.URL.Host] {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody,
		ProtoMajor: 1, ProtoMinor: 1, Request: r, ContentLength: 0}, nil
}

// BenchmarkBalanced measures a request through a route of one upstream
// URL (the direct path) and through balanced routes, in process on a
// stub transport: the cost of picking a target per attempt, and of a
// retry (a first target answering 503, the second 200) against the same
// request answered by the first try.
func BenchmarkBalanced(b *testing.B) {
	mk := func(balance string, n, retries int, tr http.RoundTripper) http.Handler {
		rt := config.DefaultRoute()
		rt.Name, rt.PathPrefix = "api", "/"
		if n == 1 {
			rt.Upstream = "http://10.0.0.1:80"
		}
		for i := range n {
			if n > 1 {
				rt.Upstreams = append(rt.Upstreams, config.TargetConfig{URL: fmt.Sprintf("http://10.0.0.%d:80", i+1), Weight: 1})
			}
		}
		rt.Balance, rt.Retries = balance, retries
		rt.RetryBudget.Percent = 100
		c := config.Default()
		c.Routes = []config.RouteConfig{rt}
		p, err := policy.Compile(c, func(string) string { return "" }, nil)
		if err != nil {
			b.Fatal(err)
		}
		h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Transport: tr})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	run := func(b *testing.B, h http.Handler, method string) {
		b.ReportAllocs()
		w := testupstream.NewDiscard()
		for b.Loop() {
			clear(w.H)
			w.Reset()
			var body io.Reader
			if method == "PUT" {
				body = strings.NewReader("payload")
			}
			r := httptest.NewRequest(method, "/x", body)
			r.RemoteAddr = "192.0.2.1:1234"
			h.ServeHTTP(w, r)
			if w.Status != 200 {
				b.Fatalf("status %d", w.Status)
			}
		}
	}
	ok := &stubTransport{}
	b.Run("single", func(b *testing.B) { run(b, mk("round_robin", 1, 0, ok), "GET") })
	for _, n := range []int{2, 8} {
		for _, bal := range []string{"round_robin", "least_request", "hash"} {
			b.Run(fmt.Sprintf("%s-%d", bal, n), func(b *testing.B) { run(b, mk(bal, n, 0, ok), "GET") })
		}
	}
	// Retries: the same request with retries = 1 answered by its first
	// target, and answered by the second after the first's 503.
	for _, m := range []string{"GET", "PUT"} {
		b.Run("retries-first-try-"+m, func(b *testing.B) { run(b, mk("round_robin", 2, 1, ok), m) })
		// Round robin with the first target always 503: every other
		// request is retried. Hash on an absent header is round robin
		// too; a route of weights puts every first try on the 503 one.
		b.Run("retries-retried-"+m, func(b *testing.B) {
			rt := config.DefaultRoute()
			rt.Name, rt.PathPrefix, rt.Retries = "api", "/", 1
			rt.RetryBudget.Percent = 100
			rt.OutlierDetection.ConsecutiveFailures = 0
			rt.Upstreams = []config.TargetConfig{{URL: "http://10.0.0.1:80", Weight: 1000}, {URL: "http://10.0.0.2:80", Weight: 1}}
			c := config.Default()
			c.Routes = []config.RouteConfig{rt}
			p, err := policy.Compile(c, func(string) string { return "" }, nil)
			if err != nil {
				b.Fatal(err)
			}
			h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}),
				Transport: &stubTransport{unavailable: map[string]bool{"10.0.0.1:80": true}}})
			if err != nil {
				b.Fatal(err)
			}
			run(b, h, m)
		})
	}
}
