// Package opscost measures what observability costs on the request path:
// the gateway's handler with no observer, with metrics (the OpenTelemetry
// SDK's MeterProvider read by the Prometheus exporter, as the gateway
// wires it), with metrics and a real SDK tracer provider that samples
// nothing, and with one that samples everything. Each runs on the full
// proxied path (a real upstream over loopback) and on a respond route:
//
//	go test -run '^$' -bench . -benchmem -count 6 ./bench/opscost
//
// The package holds only tests: the SDK is linked into nothing but the
// gateway binary and this benchmark.
package opscost

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/internal/testupstream"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/telemetry"
	"github.com/tollgate/gateway/telemetry/sdkproducer"
)

var upstreamBody = []byte(`{"ok":true,"service":"bench-upstream"}` + "\n")

// newPolicy is one route ("proxied" in front of upstream, or "respond")
// under a per-client limit that never denies in a benchmark.
func newPolicy(tb testing.TB, upstream string) *policy.Policy {
	tb.Helper()
	return policytest.Compile(tb, func(c *config.Config) {
		c.Identity.Sources = []string{"api_key", "ip"}
		l := config.DefaultLimit()
		l.Name, l.Rates = "per-client", []string{"1000000000/second"}
		c.Limits = []config.LimitConfig{l}
		rt := config.DefaultRoute()
		rt.Limits = []string{"per-client"}
		if upstream != "" {
			rt.Name, rt.Upstream = "proxied", upstream
		} else {
			rt.Name, rt.Respond = "respond", &config.RespondConfig{Status: 200, Body: "hello from tollgate\n"}
		}
		c.Routes = []config.RouteConfig{rt}
	})
}

// observability is one configuration under test.
type observability struct {
	name    string
	metrics bool
	sampler sdktrace.Sampler // nil: tracing off
}

var configs = []observability{
	{name: "none"},
	{name: "metrics", metrics: true},
	{name: "metrics+trace-sample-none", metrics: true, sampler: sdktrace.NeverSample()},
	{name: "metrics+trace-sample-all", metrics: true, sampler: sdktrace.AlwaysSample()},
}

// newMetrics returns the gateway's metrics on a fresh SDK provider read
// by the Prometheus exporter, as cmd/gateway wires them, shut down when tb
// ends, and the registry they are exported to.
func newMetrics(tb testing.TB) (*telemetry.Metrics, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	var hist sdkproducer.Source
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(),
		otelprom.WithProducer(hist.Producer("github.com/tollgate/gateway", metricdata.CumulativeTemporality)))
	if err != nil {
		tb.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	tb.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := telemetry.NewMetrics(mp.Meter("github.com/tollgate/gateway"), telemetry.MetricsOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	hist.Set(m)
	return m, reg
}

// setup builds the handler's observer and tracer as cmd/gateway does,
// with real SDK providers; check reports how many requests the metrics
// counted (0 without metrics).
func setup(tb testing.TB, o observability) (opts proxy.Options, check func() int) {
	tb.Helper()
	check = func() int { return 0 }
	if o.metrics {
		m, reg := newMetrics(tb)
		opts.Observer = m
		check = func() int { return int(counted(tb, reg, "http_server_request_duration_seconds")) }
	}
	if o.sampler != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(o.sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		if tr := telemetry.NewTracing(tp, nil); tr.Enabled() {
			opts.Tracer = tr
		}
	}
	return opts, check
}

// BenchmarkRequestPath runs Handler.ServeHTTP directly (no client, no
// server connection handling) under each observability configuration, on
// the proxied path and on a respond route, from GOMAXPROCS goroutines.
func BenchmarkRequestPath(b *testing.B) {
	for _, path := range []string{"proxied", "respond"} {
		for _, o := range configs {
			b.Run(path+"/"+o.name, func(b *testing.B) {
				upstream := ""
				if path == "proxied" {
					upstream = testupstream.Fixed(b, upstreamBody).URL
				}
				store := memstore.New(memstore.Options{MaxKeys: 1000000})
				b.Cleanup(func() { store.Close() })
				opts, check := setup(b, o)
				opts.Store, opts.Local = store, store
				opts.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
				h, err := proxy.New(newPolicy(b, upstream), opts)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					r := httptest.NewRequest("GET", "/v1/items", nil)
					r.RemoteAddr = "127.0.0.1:40000"
					r.Header.Set("X-API-Key", "bench-key")
					w := testupstream.NewDiscard()
					for pb.Next() {
						clear(w.H)
						w.Status = 0
						h.ServeHTTP(w, r)
						if w.Status != http.StatusOK {
							b.Fatalf("status %d, want 200", w.Status)
						}
					}
				})
				b.StopTimer()
				if o.metrics && check() == 0 {
					b.Fatal("metrics on, yet no request duration series was recorded")
				}
			})
		}
	}
}

// counted is the sum over the series of a counter or histogram family of
// reg: the counter values, or the histogram sample counts.
func counted(tb testing.TB, reg *prometheus.Registry, family string) uint64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				n += uint64(c.GetValue())
			}
			if h := m.GetHistogram(); h != nil {
				n += h.GetSampleCount()
			}
		}
	}
	return n
}

// TestRequestPathObserved checks the benchmark's premise once: with
// metrics on, one request is counted with its route and outcome; with
// sampling on, its span is recorded.
func TestRequestPathObserved(t *testing.T) {
	m, reg := newMetrics(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	store := memstore.New(memstore.Options{MaxKeys: 1000})
	defer store.Close()
	h, err := proxy.New(newPolicy(t, ""), proxy.Options{Store: store, Local: store, Observer: m,
		Tracer: telemetry.NewTracing(tp, nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/items", nil))
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	if n := counted(t, reg, "tollgate_decisions_total"); n != 1 {
		t.Errorf("tollgate_decisions_total = %d, want 1", n)
	}
	if n := counted(t, reg, "http_server_request_duration_seconds"); n != 1 {
		t.Errorf("http_server_request_duration_seconds count = %d, want 1", n)
	}
	names := []string{}
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 2 || names[1] != "GET respond" {
		t.Errorf("spans %q, want the store call's and \"GET respond\"", names)
	}
}
