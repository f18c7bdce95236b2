package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/testupstream"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// BenchmarkConsumers measures what the consumer registry adds to the
// request path: the same in-process respond route, one limit by client,
// 1,000 clients sending their API keys round robin, with
//
//   - none: no registry (every key is a client of its own);
//   - registry-1: a registry of one consumer holding all 1,000 keys (one
//     client: its counter is hot);
//   - registry-100000: 100,000 consumers of one key each, 1,000 of which
//     send requests;
//   - registry-100000-plans: the same with each consumer on one of two
//     plans with rates of their own (the variant lookup, Limit.For).
//
// The difference between none and registry-100000 is the lookup: hashing
// the key with SHA-256 and one map read, in a map of 100,000 entries.
func BenchmarkConsumers(b *testing.B) {
	const clients = 1000
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%06d-%s", i, strings.Repeat("x", 20)) // 31 bytes: a typical key's length
	}
	mk := func(consumers int, plans bool) http.Handler {
		c := config.Default()
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.Rates, l.By = "api", "sliding_window_counter", []string{"1000000000/second"}, []string{"client"}
		var reg strings.Builder
		if consumers > 0 {
			c.Consumers.File = "consumers.toml"
			c.Plans = []config.PlanConfig{{Name: "free"}, {Name: "pro"}}
			if plans {
				l.PlanRates = map[string][]string{"free": {"100000000/second"}, "pro": {"2000000000/second"}}
			}
			for i := range consumers {
				plan := [2]string{"free", "pro"}[i%2]
				if consumers == 1 {
					fmt.Fprintf(&reg, "[[consumers]]\nname = \"c0\"\nplan = %q\napi_keys_sha256 = [", plan)
					for k, key := range keys {
						if k > 0 {
							reg.WriteString(", ")
						}
						fmt.Fprintf(&reg, "%q", hexSum(key))
					}
					reg.WriteString("]\n")
					break
				}
				key := "unused-" + strconv.Itoa(i)
				if i < clients {
					key = keys[i]
				}
				fmt.Fprintf(&reg, "[[consumers]]\nname = \"c%d\"\nplan = %q\napi_keys_sha256 = [%q]\n", i, plan, hexSum(key))
			}
		}
		c.Limits = []config.LimitConfig{l}
		demo := config.DefaultRoute()
		demo.Name, demo.PathPrefix, demo.Limits = "demo", "/demo", []string{"api"}
		demo.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []config.RouteConfig{demo}
		p, err := policy.Compile(c, func(string) string { return "" }, func(string) ([]byte, error) { return []byte(reg.String()), nil })
		if err != nil {
			b.Fatal(err)
		}
		if p.Consumers.Registry.Len() != consumers {
			b.Fatalf("registry of %d, want %d", p.Consumers.Registry.Len(), consumers)
		}
		h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		reqs := make([]*http.Request, clients)
		for i := range reqs {
			reqs[i] = httptest.NewRequest("GET", "/demo", nil)
			reqs[i].RemoteAddr = "192.0.2.1:1234"
			reqs[i].Header.Set("X-API-Key", keys[i])
		}
		w := testupstream.NewDiscard()
		// Building a registry of 100,000 leaves megabytes of garbage
		// (the file's text, the decoded TOML): collect it now, not
		// in the timed loop.
		runtime.GC()
		for i := range reqs { // warm: every client's counter exists
			h.ServeHTTP(w, reqs[i])
		}
		if w.Status != 200 {
			b.Fatalf("status %d", w.Status)
		}
		cpu0 := cpuTime()
		n := 0
		for ; b.Loop(); n++ {
			clear(w.H)
			w.Reset()
			h.ServeHTTP(w, reqs[n%clients])
		}
		// The process's CPU time per request (GC included): on a
		// loaded machine wall-clock ns/op counts the time others ran.
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
	}
	// Each handler is built inside its sub-benchmark (before the timed
	// loop), so that running one alone builds only its registry.
	b.Run("none", func(b *testing.B) { run(b, mk(0, false)) })
	b.Run("registry-1", func(b *testing.B) { run(b, mk(1, false)) })
	b.Run("registry-100000", func(b *testing.B) { run(b, mk(100000, false)) })
	b.Run("registry-100000-plans", func(b *testing.B) { run(b, mk(100000, true)) })
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
