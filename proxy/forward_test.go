package proxy_test

import (
	"net/http"
	"testing"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

func TestLimitThenForward(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *config.Config) {
		c.Limits = []config.LimitConfig{limit("api", "fixed_window", "3/minute")}
		c.Routes = []config.RouteConfig{route("api", "/api", up.URL, "api")}
	})
	gw := serveMemory(t, p)
	for i := range 3 {
		if resp := get(t, gw.URL+"/api/x"); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i+1, resp.StatusCode)
		}
	}
	resp := get(t, gw.URL+"/api/x")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429", resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q, want ≥ 1", ra)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("upstream saw %d requests, want 3 (denied requests are not forwarded)", got)
	}
	// Another client (by API key) has its own budget.
	if resp := get(t, gw.URL+"/api/x", "X-API-Key", "other"); resp.StatusCode != 200 {
		t.Errorf("other client: status %d, want 200", resp.StatusCode)
	}
}

func TestForwardedHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *config.Config) {
		c.Identity.UserHeader = "X-User-ID"
		c.Identity.TrustedProxies = []string{"10.0.0.0/8"} // not the test client
		rt := route("api", "/v1/api", up.URL)
		rt.StripPrefix = true
		c.Routes = []config.RouteConfig{rt}
	})
	gw := serveMemory(t, p)
	req, _ := http.NewRequest("GET", gw.URL+"/v1/api/items", nil)
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	req.Header.Set("X-Real-IP", "6.6.6.6")
	req.Header.Set("X-User-ID", "admin")
	req.Header.Set("X-Gateway-User", "admin")
	req.Header.Set("Connection", "X-Custom-Hop")
	req.Header.Set("X-Custom-Hop", "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got, path := up.last()
	if path != "/items" {
		t.Errorf("upstream path %q, want /items (strip_prefix)", path)
	}
	if xff := got.Get("X-Forwarded-For"); xff != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want the peer only (client copy dropped)", xff)
	}
	for _, name := range []string{"X-Real-Ip", "X-User-Id", "X-Gateway-User", "X-Custom-Hop"} {
		if v := got.Get(name); v != "" {
			t.Errorf("upstream received client-supplied %s: %q", name, v)
		}
	}
	if got.Get("X-Forwarded-Proto") != "http" || got.Get("X-Forwarded-Host") == "" {
		t.Errorf("X-Forwarded-Proto/Host not set: %v", got)
	}
}

// TestUnderscoreUserHeader: a user header configured with '_' (which
// Go spells "X_user") reaches the upstream only from a trusted peer and
// only in that spelling; an untrusted client's copy, and "X-User" (the
// same variable to CGI-style upstreams) from anyone, are dropped.
func TestUnderscoreUserHeader(t *testing.T) {
	for _, tc := range []struct {
		trusted string // trusted_proxies: the test client is 127.0.0.1
		sent    string
		want    string // the value the upstream receives as X_user; "" none
	}{
		{"10.0.0.0/8", "X_User", ""},
		{"10.0.0.0/8", "X-User", ""},
		{"10.0.0.0/8", "x_user", ""},
		{"127.0.0.0/8", "X_User", "alice"},
		{"127.0.0.0/8", "X-User", ""},
	} {
		up := newUpstream(t, nil)
		p := compile(t, func(c *config.Config) {
			c.Identity.UserHeader = "X_User"
			c.Identity.TrustedProxies = []string{tc.trusted}
			c.Routes = []config.RouteConfig{route("api", "/api", up.URL)}
		})
		gw := serveMemory(t, p)
		req, _ := http.NewRequest("GET", gw.URL+"/api/x", nil)
		req.Header[tc.sent] = []string{"alice", "bob"} // written as is
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got, _ := up.last()
		if v := got.Get("X_User"); v != tc.want {
			t.Errorf("trusted %s, %s sent: upstream X_user %q, want %q", tc.trusted, tc.sent, v, tc.want)
		}
		if tc.sent != "X_User" && got.Get("X-User") != "" {
			t.Errorf("trusted %s, %s sent: upstream received X-User %q", tc.trusted, tc.sent, got.Get("X-User"))
		}
	}
}

// TestSwapKeepsCounters checks that an unchanged limit keeps its count
// across a policy swap and a changed one starts afresh.
func TestSwapKeepsCounters(t *testing.T) {
	up := newUpstream(t, nil)
	mk := func(rate string) *policy.Policy {
		return compile(t, func(c *config.Config) {
			c.Limits = []config.LimitConfig{limit("api", "fixed_window", rate)}
			c.Routes = []config.RouteConfig{route("api", "/", up.URL, "api")}
		})
	}
	h, err := proxy.New(mk("2/minute"), proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	get(t, gw.URL+"/")
	get(t, gw.URL+"/")
	h.Swap(mk("2/minute"))
	if resp := get(t, gw.URL+"/"); resp.StatusCode != 429 {
		t.Fatalf("after swapping in the same limit: status %d, want 429 (count kept)", resp.StatusCode)
	}
	h.Swap(mk("3/minute"))
	if resp := get(t, gw.URL+"/"); resp.StatusCode != 200 {
		t.Fatalf("after changing the limit: status %d, want 200 (new key space)", resp.StatusCode)
	}
}
