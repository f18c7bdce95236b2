package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
