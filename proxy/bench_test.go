package proxy_test

import (
	"io"
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

// BenchmarkHandler measures the gateway's cost per request in process:
//
//   - upstream-direct: a client calling the upstream over loopback, the
//     baseline;
//   - proxy-*: the same client calling the gateway, which forwards to that
//     upstream (the difference is the gateway's overhead);
//   - respond-*: the gateway answering by itself through an in-memory
//     recorder, i.e. routing, identity, limits and headers with no network.
func BenchmarkHandler(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	defer up.Close()

	mk := func(rate string, by ...string) *proxy.Handler {
		c := config.Default()
		if rate != "" {
			l := config.DefaultLimit()
			l.Name, l.Algorithm, l.Rates = "api", "sliding_window_counter", []string{rate}
			if by != nil {
				l.By = by
			}
			c.Limits = []config.LimitConfig{l}
			c.Gateway.Limits = []string{"api"}
		}
		rt := config.DefaultRoute()
		rt.Name, rt.PathPrefix, rt.Upstream = "api", "/api", up.URL
		demo := config.DefaultRoute()
		demo.Name, demo.PathPrefix = "demo", "/demo"
		demo.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []config.RouteConfig{rt, demo}
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

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	over := func(b *testing.B, url string) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	b.Run("upstream-direct", func(b *testing.B) { over(b, up.URL+"/api/x") })
	for _, tc := range []struct {
		name string
		h    *proxy.Handler
	}{
		{"proxy-nolimit", mk("")},
		{"proxy-allow", mk("1000000000/second")},
	} {
		gw := httptest.NewServer(tc.h)
		b.Run(tc.name, func(b *testing.B) { over(b, gw.URL+"/api/x") })
		gw.Close()
	}

	inProcess := func(b *testing.B, h http.Handler, keys int) {
		b.ReportAllocs()
		reqs := make([]*http.Request, keys)
		for i := range reqs {
			reqs[i] = httptest.NewRequest("GET", "/demo", nil)
			reqs[i].RemoteAddr = "192.0.2.1:1234"
			reqs[i].Header.Set("X-API-Key", "key-"+strconv.Itoa(i))
		}
		w := testupstream.NewDiscard()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			clear(w.H)
			w.Reset()
			h.ServeHTTP(w, reqs[i%keys])
		}
	}
	b.Run("respond-nolimit", func(b *testing.B) { inProcess(b, mk(""), 1) })
	b.Run("respond-allow-1key", func(b *testing.B) { inProcess(b, mk("1000000000/second"), 1) })
	b.Run("respond-allow-10000keys", func(b *testing.B) { inProcess(b, mk("1000000000/second"), 10000) })
	b.Run("respond-deny-hotkey", func(b *testing.B) { inProcess(b, mk("1/hour"), 1) })

	// A delay limit that admits at once: the waiting room is only looked
	// at, never entered.
	delay := func() *proxy.Handler {
		c := config.Default()
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.Rates = "api", "token_bucket", []string{"1000000000/second"}
		l.By, l.OnLimit, l.MaxDelay = []string{"api_key"}, "delay", "1s"
		c.Limits = []config.LimitConfig{l}
		c.Gateway.Limits = []string{"api"}
		demo := config.DefaultRoute()
		demo.Name, demo.PathPrefix = "demo", "/demo"
		demo.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
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
	b.Run("respond-delay-allow-1key", func(b *testing.B) { inProcess(b, delay(), 1) })
	b.Run("respond-delay-allow-10000keys", func(b *testing.B) { inProcess(b, delay(), 10000) })
}
