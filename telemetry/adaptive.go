package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names of the adaptive_concurrency limits.
const (
	MetricAdaptiveLimit         = "tollgate.adaptive.limit"
	MetricAdaptiveInFlight      = "tollgate.adaptive.in_flight"
	MetricAdaptiveMinLatency    = "tollgate.adaptive.min_latency"
	MetricAdaptiveSampleLatency = "tollgate.adaptive.sample_latency"
	MetricAdaptiveShed          = "tollgate.adaptive.shed"
)

// AdaptiveLimiter is one adaptive limiter's figures at a collection. Limit
// and Route are bounded by the configuration.
type AdaptiveLimiter struct {
	// Limit is the limit's name; Route the route it learns for ("" when
	// one limiter serves every route of the limit).
	Limit, Route string
	// Learned is the learned limit; InFlight the requests holding a slot.
	Learned  float64
	InFlight int64
	// MinLatency and SampleLatency are the base latency and the last
	// window's median, in seconds.
	MinLatency, SampleLatency float64
	// Shed counts the requests refused, by priority name.
	Shed map[string]uint64
}

// RegisterAdaptiveStats exports the adaptive limiters' learned limit,
// in-flight count, base and sampled latency and shed counts per priority
// as observable instruments on meter; read is called at each collection,
// off the request path.
func RegisterAdaptiveStats(meter metric.Meter, read func() []AdaptiveLimiter) (metric.Registration, error) {
	limit, e1 := meter.Float64ObservableGauge(MetricAdaptiveLimit, metric.WithUnit("{request}"),
		metric.WithDescription("The concurrency an adaptive_concurrency limit has learned the upstream takes."))
	inflight, e2 := meter.Int64ObservableGauge(MetricAdaptiveInFlight, metric.WithUnit("{request}"),
		metric.WithDescription("Requests holding a slot of an adaptive_concurrency limit."))
	minLat, e3 := meter.Float64ObservableGauge(MetricAdaptiveMinLatency, metric.WithUnit("s"),
		metric.WithDescription("The upstream's base latency as an adaptive_concurrency limit last measured it (0 until measured)."))
	sample, e4 := meter.Float64ObservableGauge(MetricAdaptiveSampleLatency, metric.WithUnit("s"),
		metric.WithDescription("The median upstream latency of an adaptive_concurrency limit's last sample window."))
	shed, e5 := meter.Int64ObservableCounter(MetricAdaptiveShed, metric.WithUnit("{request}"),
		metric.WithDescription("Requests an adaptive_concurrency limit refused with 503 (in shadow mode: would have), by priority."))
	if err := errors.Join(e1, e2, e3, e4, e5); err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, l := range read() {
			attrs := metric.WithAttributes(attribute.String("limit", l.Limit), attribute.String("route", l.Route))
			o.ObserveFloat64(limit, l.Learned, attrs)
			o.ObserveInt64(inflight, l.InFlight, attrs)
			o.ObserveFloat64(minLat, l.MinLatency, attrs)
			o.ObserveFloat64(sample, l.SampleLatency, attrs)
			for p, n := range l.Shed {
				o.ObserveInt64(shed, int64(n), metric.WithAttributes(attribute.String("limit", l.Limit),
					attribute.String("route", l.Route), attribute.String("priority", p)))
			}
		}
		return nil
	}, limit, inflight, minLat, sample, shed)
}
