package proxy_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

func TestShadowLimitNeverDenies(t *testing.T) {
	up := newUpstream(t, nil)
	p := compile(t, func(c *config.Config) {
		l := limit("candidate", "fixed_window", "1/minute")
		l.Mode = "shadow"
		c.Limits = []config.LimitConfig{l}
		c.Routes = []config.RouteConfig{route("api", "/", up.URL, "candidate")}
	})
	var obs recorder
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: &obs})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	for i := range 3 {
		resp := get(t, gw.URL+"/x")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200 (shadow never denies)", i+1, resp.StatusCode)
		}
		if v := resp.Header.Get("RateLimit-Policy"); strings.Contains(v, "candidate") {
			t.Errorf("shadow limit in RateLimit-Policy: %q", v)
		}
	}
	if got := obs.shadowDenied.Load(); got != 2 {
		t.Errorf("observer saw %d shadow denials, want 2", got)
	}
}

// TestOnMissing: a limit keyed by API key, hit by
// clients that send none.
func TestOnMissing(t *testing.T) {
	for _, tc := range []struct {
		onMissing string
		// statuses of: key A, key A, no key from IP 1, no key from IP 1,
		// no key from IP 2 (limit 1 per hour per key)
		want []int
	}{
		{"shared", []int{200, 429, 200, 429, 429}}, // one "-" bucket for every keyless request
		{"ip", []int{200, 429, 200, 429, 200}},     // one bucket per IP
		{"reject", []int{200, 429, 401, 401, 401}}, // 401, nothing counted
	} {
		t.Run(tc.onMissing, func(t *testing.T) {
			p := compile(t, func(c *config.Config) {
				l := limit("per-key", "fixed_window", "1/hour")
				l.By, l.OnMissing = []string{"api_key"}, tc.onMissing
				c.Limits = []config.LimitConfig{l}
				rt := route("demo", "/", "", "per-key")
				rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
				c.Routes = []config.RouteConfig{rt}
			})
			h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
			if err != nil {
				t.Fatal(err)
			}
			for i, req := range []struct{ key, ip string }{
				{"A", "192.0.2.1"}, {"A", "192.0.2.1"}, {"", "192.0.2.1"}, {"", "192.0.2.1"}, {"", "192.0.2.2"},
			} {
				r := httptest.NewRequest("GET", "/x", nil)
				r.RemoteAddr = req.ip + ":1234"
				if req.key != "" {
					r.Header.Set("X-API-Key", req.key)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != tc.want[i] {
					t.Errorf("request %d (key %q, ip %s): status %d, want %d", i+1, req.key, req.ip, w.Code, tc.want[i])
				}
			}
		})
	}
}
