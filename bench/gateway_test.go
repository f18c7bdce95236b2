// Package bench holds the gateway's in-process request-path benchmarks,
// the profiling companion of the peer benchmark (bench/peer.sh): the
// gateway binary has no pprof endpoint, so its request path is run here
// with a real upstream over loopback, under -cpuprofile and -memprofile:
//
//	go test -run '^$' -bench 'Handler/allow-1key' -benchmem -cpuprofile cpu.out -memprofile mem.out ./bench
//	go tool pprof -top -focus 'proxy.\(\*Handler\).ServeHTTP' bench.test cpu.out
package bench

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/internal/testupstream"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// upstreamBody is what the benchmark upstream answers, as in peer.sh.
var upstreamBody = []byte(`{"ok":true,"service":"bench-upstream"}` + "\n")

// benchMode is one gateway configuration of the peer benchmark.
type benchMode struct {
	name     string
	rate     string // "" for no limit
	manyKeys bool
	status   int // every response must have it (after the first, for deny)
}

var benchModes = []benchMode{
	{name: "plain", status: http.StatusOK},
	{name: "allow-1key", rate: "1000000000/second", status: http.StatusOK},
	{name: "allow-10kkeys", rate: "1000000000/second", manyKeys: true, status: http.StatusOK},
	{name: "deny-hot", rate: "1/hour", status: http.StatusTooManyRequests},
}

// newHandler builds the gateway's handler for m in front of upstream, as
// cmd/gateway does (memory store, warn-level logger).
func newHandler(tb testing.TB, m benchMode, upstream string) *proxy.Handler {
	tb.Helper()
	p := policytest.Compile(tb, func(c *config.Config) {
		c.Identity.Sources = []string{"api_key", "ip"}
		c.Headers.Emit = []string{"ietf"}
		if m.rate != "" {
			l := config.DefaultLimit()
			l.Name, l.Rates = "per-client", []string{m.rate}
			c.Limits = []config.LimitConfig{l}
			c.Gateway.Limits = []string{"per-client"}
		}
		rt := config.DefaultRoute()
		rt.Name, rt.Upstream = "upstream", upstream
		c.Routes = []config.RouteConfig{rt}
	})
	store := memstore.New(memstore.Options{MaxKeys: 1000000})
	tb.Cleanup(func() { store.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := proxy.New(p, proxy.Options{Store: store, Local: store, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// keyNames are the 10,000 API keys of the many-keys modes, built before
// the timer starts.
var keyNames = func() []string {
	k := make([]string, 10000)
	for i := range k {
		k[i] = "key-" + strconv.Itoa(i)
	}
	return k
}()

// BenchmarkHandler is the gateway's own request path: Handler.ServeHTTP
// called directly (no client, no server connection handling), forwarding
// to a real upstream over loopback. allocs/op are the gateway's alone
// plus its upstream Transport's.
func BenchmarkHandler(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			up := testupstream.Fixed(b, upstreamBody)
			h := newHandler(b, m, up.URL)
			// The hot key's first request is allowed; then it is denied.
			warm := httptest.NewRequest("GET", "/v1/items", nil)
			warm.Header.Set("X-API-Key", "hot-key")
			h.ServeHTTP(testupstream.NewDiscard(), warm)
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest("GET", "/v1/items", nil)
				r.RemoteAddr = "127.0.0.1:40000"
				r.Header.Set("X-API-Key", "hot-key")
				w := testupstream.NewDiscard()
				for pb.Next() {
					if m.manyKeys {
						r.Header["X-Api-Key"][0] = keyNames[seq.Add(1)%int64(len(keyNames))]
					}
					clear(w.H)
					w.Status = 0
					h.ServeHTTP(w, r)
					if w.Status != m.status {
						b.Fatalf("status %d, want %d", w.Status, m.status)
					}
				}
			})
		})
	}
}

// BenchmarkServer is the whole exchange as a client sees it: a keep-alive
// client, the gateway behind a real net/http server, the upstream. Its
// CPU profile includes the client and the upstream; focus on the
// gateway's server goroutines with -focus 'conn\).serve' minus the
// upstream's handler.
func BenchmarkServer(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			up := testupstream.Fixed(b, upstreamBody)
			gw := httptest.NewServer(newHandler(b, m, up.URL))
			b.Cleanup(gw.Close)
			tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			get := func(key string) int {
				req, err := http.NewRequest("GET", gw.URL+"/v1/items", nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("X-API-Key", key)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			get("hot-key")
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := "hot-key"
					if m.manyKeys {
						key = keyNames[seq.Add(1)%int64(len(keyNames))]
					}
					if st := get(key); st != m.status {
						b.Fatalf("status %d, want %d", st, m.status)
					}
				}
			})
		})
	}
}
