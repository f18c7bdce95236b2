package proxy_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// BenchmarkOverrides measures what overrides add to a request answered by
// the gateway itself (one per-client limit, allowed): none in the table
// (the cost of having the table at all), 1,000 overrides of other clients
// on the same limit (a map lookup of the request's counter key), and one
// of the requesting client (its limit decides).
func BenchmarkOverrides(b *testing.B) {
	c := config.Default()
	l := config.DefaultLimit()
	l.Name, l.Algorithm, l.Rates = "api", "gcra", []string{"1000000000/second"}
	c.Limits = []config.LimitConfig{l}
	rt := config.DefaultRoute()
	rt.Name, rt.PathPrefix, rt.Limits = "demo", "/demo", []string{"api"}
	rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
	c.Routes = []config.RouteConfig{rt}
	p, err := policy.Compile(c, func(string) string { return "" }, nil)
	if err != nil {
		b.Fatal(err)
	}
	pl := p.Limit("api")
	put := func(t ratelimit.OverrideTable, client string) {
		id := keys.Identity{Client: client, ClientKind: keys.SourceAPIKey, APIKey: client}
		subject, err := p.OverrideSubject(pl, &id)
		if err != nil {
			b.Fatal(err)
		}
		o := ratelimit.Override{Limit: "api", Subject: subject, Scope: pl.Scope,
			Rates: []ratelimit.Rate{{Limit: 2000000000, Window: time.Second}}, Expires: time.Now().Add(time.Hour)}
		if err := t.PutOverride(context.Background(), time.Now(), o, 100000); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		others int
		own    bool
		sync   bool
	}{
		{"without", 0, false, false},
		{"empty-table", 0, false, true},
		{"1000-others", 1000, false, true},
		{"own", 1000, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := memstore.New(memstore.Options{})
			opts := proxy.Options{Store: store}
			if tc.sync {
				for i := range tc.others {
					put(store, fmt.Sprintf("other-%d", i))
				}
				if tc.own {
					put(store, "me")
				}
				s := override.New(store, override.Options{})
				if err := s.Refresh(context.Background()); err != nil {
					b.Fatal(err)
				}
				opts.Overrides = s
			}
			h, err := proxy.New(p, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("GET", "/demo", nil)
					r.Header.Set("X-API-Key", "me")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Errorf("status %d", w.Code)
						return
					}
				}
			})
		})
	}
}
