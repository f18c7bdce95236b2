package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/telemetry"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestPrometheusScrape records a known sequence through telemetry.Metrics
// and scrapes /metrics in the Prometheus text format.
func TestPrometheusScrape(t *testing.T) {
	ctx := context.Background()
	o, err := setupTelemetry(ctx, nil, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Shutdown(ctx)
	if o.TracerProvider() != nil {
		t.Fatal("tracing is on with no OTEL_* variables set")
	}
	m, err := telemetry.NewMetrics(o.Meter(), telemetry.MetricsOptions{LiveKeys: func() int64 { return 7 }, Evictions: func() int64 { return 3 }})
	if err != nil {
		t.Fatal(err)
	}
	o.SetMetrics(m)
	l := &ratelimit.Limit{Name: "per-client", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 2, Window: time.Second}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	for i, allowed := range []bool{true, true, false} {
		out := proxy.OutcomeForwarded
		if !allowed {
			out = proxy.OutcomeLimited
		}
		m.Observe(&proxy.Event{Route: "demo", Method: "GET", Status: 200, Outcome: out,
			Hits:         []ratelimit.Hit{{Limit: l}},
			Decisions:    []ratelimit.Decision{{Allowed: allowed, Limit: 2, Remaining: int64(1 - i)}},
			StoreLatency: time.Millisecond, Duration: 2 * time.Millisecond})
	}
	m.Reload(false)

	srv := httptest.NewServer(o.MetricsHandler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	for _, want := range []string{
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="demo",tollgate_outcome="forwarded"} 2`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_route="demo",tollgate_outcome="limited"} 1`,
		`tollgate_decisions_total{tollgate_decision="allowed",tollgate_limit="per-client",tollgate_mode="enforce"} 2`,
		`tollgate_decisions_total{tollgate_decision="denied",tollgate_limit="per-client",tollgate_mode="enforce"} 1`,
		`tollgate_near_limit_total{tollgate_limit="per-client"} 1`,
		`tollgate_store_duration_seconds_count 3`,
		`tollgate_config_reloads_total{tollgate_result="failure"} 1`,
		`tollgate_store_memory_keys 7`,
		`tollgate_store_memory_evictions_total 3`,
		`target_info{service_name="tollgate"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// TestPrometheusHistogram: the upstream-duration histogram, aggregated by
// telemetry and handed to the Prometheus exporter at the scrape, reads as
// a hand-computed table: cumulative buckets by inclusive upper bound, sum
// and count, and its help and type lines.
func TestPrometheusHistogram(t *testing.T) {
	ctx := context.Background()
	o, err := setupTelemetry(ctx, nil, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Shutdown(ctx)
	m, err := telemetry.NewMetrics(o.Meter(), telemetry.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o.SetMetrics(m)
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 5*time.Millisecond + 1, 99 * time.Millisecond,
		10 * time.Second, 10*time.Second + 1, time.Hour} {
		m.Upstream("demo", d)
	}
	text := scrape(t, o)
	want := []string{
		"# HELP tollgate_upstream_duration_seconds Duration of upstream exchanges, by route.",
		"# TYPE tollgate_upstream_duration_seconds histogram",
	}
	for _, b := range []struct {
		le string
		n  int
	}{{"0.005", 2}, {"0.01", 3}, {"0.025", 3}, {"0.05", 3}, {"0.075", 3}, {"0.1", 4}, {"0.25", 4}, {"0.5", 4},
		{"0.75", 4}, {"1", 4}, {"2.5", 4}, {"5", 4}, {"7.5", 4}, {"10", 5}, {"+Inf", 7}} {
		want = append(want, fmt.Sprintf(`tollgate_upstream_duration_seconds_bucket{http_route="demo",le="%s"} %d`, b.le, b.n))
	}
	want = append(want,
		`tollgate_upstream_duration_seconds_sum{http_route="demo"} 3620.109000002`,
		`tollgate_upstream_duration_seconds_count{http_route="demo"} 7`)
	lines := strings.Split(text, "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("scrape lacks %s", w)
		}
	}
	// Nothing was recorded into the other histograms: not exported.
	for _, absent := range []string{"http_server_request_duration", "tollgate_store_duration", "tollgate_delay_duration"} {
		if strings.Contains(text, absent) {
			t.Errorf("scrape has %s, nothing was recorded", absent)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// scrape returns o's /metrics text.
func scrape(t *testing.T, o *otelSetup) string {
	t.Helper()
	srv := httptest.NewServer(o.MetricsHandler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTracingFromEnv(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		env     []string
		on      bool
		sampler string
		err     string
	}{
		{env: nil, on: false},
		{env: []string{"OTEL_TRACES_SAMPLER=always_on"}, on: false}, // a sampler alone exports nowhere
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"}, on: true, sampler: "ParentBased{root:AlwaysOnSampler"},
		{env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1/v1/traces", "OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.25"},
			on: true, sampler: "TraceIDRatioBased{0.25}"},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_EXPORTER=none"}, on: false},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_SDK_DISABLED=true"}, on: false},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_SAMPLER=sometimes"}, err: "unsupported sampler"},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=2"}, err: "ratio"},
	} {
		o, err := setupTelemetry(ctx, tc.env, quietLogger())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		tp := o.TracerProvider()
		if (tp != nil) != tc.on {
			t.Errorf("%v: tracing on = %v, want %v", tc.env, tp != nil, tc.on)
		}
		if tc.on {
			if d := o.sampler.Description(); !strings.HasPrefix(d, tc.sampler) {
				t.Errorf("%v: sampler %s, want %s", tc.env, d, tc.sampler)
			}
		}
		if telemetry.NewTracing(tp, nil).Enabled() != tc.on {
			t.Errorf("%v: telemetry.NewTracing enabled mismatch", tc.env)
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = o.Shutdown(sctx) // the exporters point at a closed port; a failed flush is expected
		cancel()
	}
}

// BenchmarkRuntimeCollectors is what the Go runtime's and the process's
// metrics add to a scrape of /metrics: one gathering of the collectors and
// their text exposition, each alone and both.
func BenchmarkRuntimeCollectors(b *testing.B) {
	for _, c := range []struct {
		name string
		cs   []prometheus.Collector
	}{
		{"go", []prometheus.Collector{collectors.NewGoCollector()}},
		{"process", []prometheus.Collector{collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}},
		{"both", []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c.cs...)
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			req := httptest.NewRequest("GET", "/metrics", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
				b.SetBytes(int64(w.Body.Len()))
			}
		})
	}
}
