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

// BenchmarkExprLimit measures what a limit's when and key expressions
// cost on the request path, against the same limit keyed by the same
// header through by (no expression): the gateway answering by itself,
// in process, so the difference is the expressions' evaluation.
func BenchmarkExprLimit(b *testing.B) {
	mk := func(set func(l *config.LimitConfig)) *proxy.Handler {
		c := config.Default()
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.Rates = "api", "sliding_window_counter", []string{"1000000000/second"}
		set(&l)
		c.Limits = []config.LimitConfig{l}
		demo := config.DefaultRoute()
		demo.Name, demo.PathPrefix = "demo", "/demo"
		demo.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		demo.Limits = []string{"api"}
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
	run := func(b *testing.B, h http.Handler, keys int) {
		b.ReportAllocs()
		reqs := make([]*http.Request, keys)
		for i := range reqs {
			reqs[i] = httptest.NewRequest("GET", "/demo/orders", nil)
			reqs[i].RemoteAddr = "192.0.2.1:1234"
			reqs[i].Header.Set("X-Tenant", "tenant-"+strconv.Itoa(i))
			reqs[i].Header.Set("User-Agent", "bench")
			reqs[i].Header.Set("Accept", "*/*")
		}
		w := testupstream.NewDiscard()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			clear(w.H)
			w.Reset()
			h.ServeHTTP(w, reqs[i%keys])
		}
	}
	byHeader := mk(func(l *config.LimitConfig) { l.By = []string{"header:X-Tenant"} })
	exprs := mk(func(l *config.LimitConfig) {
		l.When = `request.method == "GET" && request.path.startsWith("/demo")`
		l.Key = `request.headers["x-tenant"]`
	})
	// A concatenated key, as the README's example writes one (in the
	// subset compiled to Go), and a key outside that subset (split), which
	// CEL's interpreter evaluates.
	concat := mk(func(l *config.LimitConfig) {
		l.When = `request.method == "GET" && request.path.startsWith("/demo")`
		l.Key = `request.headers["x-tenant"] + ":" + request.method`
	})
	interp := mk(func(l *config.LimitConfig) {
		l.When = `request.method == "GET" && request.path.startsWith("/demo")`
		l.Key = `request.path.split("/")[1] + ":" + request.headers["x-tenant"]`
	})
	for _, keys := range []int{1, 10000} {
		n := strconv.Itoa(keys)
		b.Run("by-header-"+n+"keys", func(b *testing.B) { run(b, byHeader, keys) })
		b.Run("when-key-"+n+"keys", func(b *testing.B) { run(b, exprs, keys) })
		b.Run("when-concat-key-"+n+"keys", func(b *testing.B) { run(b, concat, keys) })
		b.Run("when-key-cel-"+n+"keys", func(b *testing.B) { run(b, interp, keys) })
	}
}
