package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestOverrideMatchesLivePath: an override PUT for a client, as the admin
// API names it, applies to exactly the live requests counted on that
// client's counter (on_missing, IPv6 prefixes and extra key parts
// included), and to no other client's.
func TestOverrideMatchesLivePath(t *testing.T) {
	type req struct{ method, remote, apiKey string }
	tests := []struct {
		name, limit, key string
		by               []string
		onMissing        string
		match, other     req
	}{
		{"api key", "l", "api_key:alice", []string{"client"}, "", req{"GET", "192.0.2.1:1", "alice"}, req{"GET", "192.0.2.1:1", "bob"}},
		{"bare api key", "l", "alice", []string{"client"}, "", req{"GET", "192.0.2.7:1", "alice"}, req{"GET", "192.0.2.7:1", ""}},
		{"ip", "l", "ip:198.51.100.9", []string{"client"}, "", req{"GET", "198.51.100.9:1", ""}, req{"GET", "198.51.100.10:1", ""}},
		{"ip, not the key sent from it", "l", "ip:198.51.100.9", []string{"client"}, "", req{"GET", "198.51.100.9:1", ""}, req{"GET", "198.51.100.9:1", "alice"}},
		{"per route", "l", "api_key:alice", []string{"client", "route"}, "", req{"GET", "192.0.2.1:1", "alice"}, req{"GET", "192.0.2.1:1", "bob"}},
		{"per method", "l", "api_key:alice", []string{"client", "method"}, "", req{"POST", "192.0.2.1:1", "alice"}, req{"POST", "192.0.2.1:1", "bob"}},
		{"keyless by ip", "l", "ip:198.51.100.9", []string{"api_key"}, "ip", req{"GET", "198.51.100.9:1", ""}, req{"GET", "198.51.100.9:1", "alice"}},
		{"key with on_missing ip", "l", "api_key:alice", []string{"api_key"}, "ip", req{"GET", "198.51.100.9:1", "alice"}, req{"GET", "198.51.100.9:1", ""}},
		{"IPv6 in the same /64", "l", "ip:2001:db8::ffff", []string{"ip"}, "", req{"GET", "[2001:db8::7]:1", "alice"}, req{"GET", "[2001:db8:0:1::7]:1", "alice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := policytest.Compile(t, func(c *config.Config) {
				l := config.DefaultLimit()
				l.Name, l.Algorithm, l.Rates, l.By = tc.limit, "fixed_window", []string{"1/1h"}, tc.by
				if tc.onMissing != "" {
					l.OnMissing = tc.onMissing
				}
				c.Limits = []config.LimitConfig{l}
				rt := config.DefaultRoute()
				rt.Name, rt.PathPrefix, rt.Limits = "demo", "/", []string{tc.limit}
				rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
				c.Routes = []config.RouteConfig{rt}
			})
			store := memstore.New(memstore.Options{})
			t.Cleanup(func() { store.Close() })
			sync := override.New(store, override.Options{})
			gw, err := proxy.New(p, proxy.Options{Store: store, Overrides: sync})
			if err != nil {
				t.Fatal(err)
			}
			adm := Handler(Options{Store: store, Overrides: store, OverrideSync: sync, Policy: gw.Policy})
			body := fmt.Sprintf(`{"limit": %q, "key": %q, "rates": ["3/1h"], "expires": %q}`, tc.limit, tc.key,
				time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			w := httptest.NewRecorder()
			adm.ServeHTTP(w, httptest.NewRequest("PUT", "/admin/overrides", strings.NewReader(body)))
			if w.Code != 200 {
				t.Fatalf("PUT: %d %s", w.Code, w.Body)
			}
			if err := sync.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			count := func(rq req) int {
				n := 0
				for range 5 {
					r := httptest.NewRequest(rq.method, "/x", nil)
					r.RemoteAddr = rq.remote
					if rq.apiKey != "" {
						r.Header.Set("X-API-Key", rq.apiKey)
					}
					w := httptest.NewRecorder()
					gw.ServeHTTP(w, r)
					if w.Code == http.StatusOK {
						n++
					}
				}
				return n
			}
			if n := count(tc.match); n != 3 {
				t.Errorf("the overridden client: %d of 5 admitted, want the override's 3", n)
			}
			if n := count(tc.other); n != 1 {
				t.Errorf("another client: %d of 5 admitted, want the limit's 1", n)
			}
		})
	}
}
