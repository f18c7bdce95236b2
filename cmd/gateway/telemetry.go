package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/gateway/telemetry"
	"github.com/tollgate/gateway/telemetry/sdkproducer"
)

// meterName is the gateway's instrumentation scope.
const meterName = "github.com/tollgate/gateway"

// otelSetup is the process's OpenTelemetry SDK: a meter provider exported
// in Prometheus text format on the admin listener's /metrics (from a
// private registry, beside the Go runtime's and the process's metrics) and, when the standard OTEL_EXPORTER_OTLP_* variables
// say so, over OTLP/HTTP; and, only when an OTLP traces endpoint is
// configured, a tracer provider sampling as OTEL_TRACES_SAMPLER says.
type otelSetup struct {
	meterProvider  *sdkmetric.MeterProvider
	tracerProvider *sdktrace.TracerProvider // nil: tracing off
	sampler        sdktrace.Sampler         // the tracer provider's sampler
	registry       *prometheus.Registry
	metricsHandler http.Handler
	// histograms feeds every reader the duration histograms that
	// telemetry.Metrics aggregates itself (SetMetrics).
	histograms sdkproducer.Source
}

// Meter returns the gateway's meter.
func (o *otelSetup) Meter() metric.Meter { return o.meterProvider.Meter(meterName) }

// SetMetrics exports m's duration histograms from the next collection on,
// beside the meter's instruments.
func (o *otelSetup) SetMetrics(m *telemetry.Metrics) { o.histograms.Set(m) }

// TracerProvider returns the tracer provider, or nil when tracing is off
// (telemetry.NewTracing(nil, nil) is then tracing off at zero cost).
func (o *otelSetup) TracerProvider() trace.TracerProvider {
	if o.tracerProvider == nil {
		return nil
	}
	return o.tracerProvider
}

// MetricsHandler serves the Prometheus text exposition for /metrics.
func (o *otelSetup) MetricsHandler() http.Handler { return o.metricsHandler }

// Shutdown flushes and stops the exporters.
func (o *otelSetup) Shutdown(ctx context.Context) error {
	var err error
	if o.tracerProvider != nil {
		err = o.tracerProvider.Shutdown(ctx)
	}
	return errors.Join(err, o.meterProvider.Shutdown(ctx))
}

// setupTelemetry builds the SDK from environ (the standard OTEL_* variables).
// The OTLP exporters read their own OTEL_EXPORTER_OTLP_* settings
// (endpoint, headers, timeout, compression) from the process environment.
func setupTelemetry(ctx context.Context, environ []string, log *slog.Logger) (*otelSetup, error) {
	env := func(k string) string { return strings.TrimSpace(lookupEnv(environ, k)) }
	o := &otelSetup{registry: prometheus.NewRegistry()}
	res := telemetryResource(env)

	prom, err := otelprom.New(otelprom.WithRegisterer(o.registry), otelprom.WithoutScopeInfo(),
		otelprom.WithProducer(o.histograms.Producer(meterName, metricdata.CumulativeTemporality)))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	// The Go runtime's and the process's figures under the names every
	// Prometheus user's dashboards and alerts know (go_goroutines,
	// go_memstats_*, process_resident_memory_bytes, process_open_fds, ...),
	// from client_golang, already the exposition's library. They are read
	// at each scrape, in /metrics only: OTLP gets the gateway's own metrics.
	// The Go collector reads runtime/metrics, which does not stop the
	// world; the process collector reads a few files under /proc/self.
	o.registry.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.metricsHandler = promhttp.HandlerFor(o.registry, promhttp.HandlerOpts{})
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom)}

	disabled := strings.EqualFold(env("OTEL_SDK_DISABLED"), "true")
	if !disabled && otlpWanted(env, "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
		warnProtocol(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", log)
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metrics exporter: %w", err)
		}
		// The periodic reader reads OTEL_METRIC_EXPORT_INTERVAL/TIMEOUT.
		hist := o.histograms.Producer(meterName, exp.Temporality(sdkmetric.InstrumentKindHistogram))
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(hist))))
		log.Info("exporting metrics over OTLP/HTTP")
	}
	o.meterProvider = sdkmetric.NewMeterProvider(mopts...)

	if !disabled && otlpWanted(env, "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		sampler, err := samplerFromEnv(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG"))
		if err != nil {
			_ = o.meterProvider.Shutdown(ctx)
			return nil, err
		}
		warnProtocol(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", log)
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			_ = o.meterProvider.Shutdown(ctx)
			return nil, fmt.Errorf("OTLP traces exporter: %w", err)
		}
		o.sampler = sampler
		o.tracerProvider = sdktrace.NewTracerProvider(sdktrace.WithResource(res),
			sdktrace.WithSampler(sampler), sdktrace.WithBatcher(exp))
		log.Info("tracing on, exporting over OTLP/HTTP", "sampler", sampler.Description())
	}
	return o, nil
}

// telemetryResource names the service: OTEL_SERVICE_NAME (default
// "tollgate"), its version, and OTEL_RESOURCE_ATTRIBUTES (k=v,...).
func telemetryResource(env func(string) string) *resource.Resource {
	attrs := []attribute.KeyValue{attribute.String("service.version", version)}
	for _, kv := range strings.Split(env("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) != "" {
			attrs = append(attrs, attribute.String(strings.TrimSpace(k), strings.TrimSpace(v)))
		}
	}
	name := env("OTEL_SERVICE_NAME")
	if name == "" {
		name = "tollgate"
	}
	attrs = append(attrs, attribute.String("service.name", name))
	return resource.NewSchemaless(attrs...)
}

// otlpWanted reports whether a signal is exported over OTLP: its
// OTEL_*_EXPORTER lists "otlp", or is unset while an OTLP endpoint (the
// signal's own or the shared one) is configured. "none" turns it off.
func otlpWanted(env func(string) string, exporterVar, endpointVar string) bool {
	switch ex := env(exporterVar); ex {
	case "":
		return env(endpointVar) != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	default:
		for _, e := range strings.Split(ex, ",") {
			if strings.TrimSpace(e) == "otlp" {
				return true
			}
		}
		return false
	}
}

func warnProtocol(env func(string) string, signalVar string, log *slog.Logger) {
	p := env(signalVar)
	if p == "" {
		p = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p != "" && p != "http/protobuf" {
		log.Warn("only the http/protobuf OTLP protocol is supported; using it", "protocol", p)
	}
}

// samplerFromEnv maps OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG to a
// sampler as the OpenTelemetry specification defines them. The default is
// parentbased_always_on.
func samplerFromEnv(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: want a ratio in [0, 1], got %q", arg)
		}
		return f, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		f, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(f), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: unsupported sampler %q (want always_on, always_off, traceidratio or their parentbased_ forms)", name)
}
