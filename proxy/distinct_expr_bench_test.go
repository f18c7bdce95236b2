package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/tollgate/gateway/internal/testupstream"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// BenchmarkDistinctExpr measures what a distinct limit's value costs on
// the request path as an expression against the same value as a key part:
// distinct = "header:X-User" and distinct = 'request.headers["x-user"]'
// (in the subset compiled to Go), one client, 100 values cycling under a
// limit that allows them all (exact counting), the gateway answering by
// itself in process.
func BenchmarkDistinctExpr(b *testing.B) {
	mk := func(distinct string) http.Handler {
		c := config.Default()
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.Rates, l.Distinct, l.By = "users", "distinct", []string{"128/1h"}, distinct, []string{"ip"}
		c.Limits = []config.LimitConfig{l}
		demo := config.DefaultRoute()
		demo.Name, demo.PathPrefix = "demo", "/demo"
		demo.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		demo.Limits = []string{"users"}
		c.Routes = []config.RouteConfig{demo}
		p, err := policy.Compile(c, func(string) string { return "" }, nil)
		if err != nil {
			b.Fatal(err)
		}
		h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		reqs := make([]*http.Request, 100)
		for i := range reqs {
			reqs[i] = httptest.NewRequest("GET", "/demo/login", nil)
			reqs[i].RemoteAddr = "192.0.2.1:1234"
			reqs[i].Header.Set("X-User", "user-"+strconv.Itoa(i))
		}
		w := testupstream.NewDiscard()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			clear(w.H)
			w.Reset()
			h.ServeHTTP(w, reqs[i%len(reqs)])
			if w.Status != 200 {
				b.Fatalf("status %d", w.Status)
			}
		}
	}
	part, expr := mk("header:X-User"), mk(`request.headers["x-user"]`)
	b.Run("key-part", func(b *testing.B) { run(b, part) })
	b.Run("expression", func(b *testing.B) { run(b, expr) })
}
