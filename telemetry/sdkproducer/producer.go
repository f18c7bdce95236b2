// Package sdkproducer hands the duration histograms that telemetry.Metrics
// aggregates itself to the OpenTelemetry SDK's metric readers, as a metric
// producer (sdkmetric.WithProducer, the Prometheus exporter's
// WithProducer): each reader collects them beside the meter's own
// instruments, under the gateway's instrumentation scope. It is SDK glue:
// only the wiring (cmd/gateway) and tests and benchmarks that wire the SDK
// as it does import it.
package sdkproducer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/gateway/telemetry"
)

// Source is the metrics whose histograms the producers export. The
// readers exist before the metrics (a reader takes its producers when it
// is built), so it is set later, once; until then the producers export
// nothing. The zero Source is ready to use.
type Source struct {
	m atomic.Pointer[telemetry.Metrics]
}

// Set makes m the metrics exported from now on.
func (s *Source) Set(m *telemetry.Metrics) { s.m.Store(m) }

// Producer returns a producer for one reader, exporting under scope with
// the reader's temporality for histograms. Each reader needs its own: a
// delta reader remembers what it exported last.
func (s *Source) Producer(scope string, temporality metricdata.Temporality) sdkmetric.Producer {
	return &producer{src: s, scope: instrumentation.Scope{Name: scope}, delta: temporality == metricdata.DeltaTemporality}
}

type producer struct {
	src   *Source
	scope instrumentation.Scope
	delta bool

	mu   sync.Mutex // a delta reader's state, across collections
	last time.Time
	prev map[pointKey]telemetry.HistogramPoint
}

// pointKey names one exported series.
type pointKey struct {
	name  string
	attrs attribute.Distinct
}

// Produce implements sdkmetric.Producer.
func (p *producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	m := p.src.m.Load()
	if m == nil {
		return nil, nil
	}
	if p.delta {
		// The snapshot is read under the lock: two collections that
		// overlapped could otherwise keep the older snapshot as the
		// previous one, and the next delta would count its values twice.
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	hs := m.Histograms()
	now := time.Now()
	sm := metricdata.ScopeMetrics{Scope: p.scope, Metrics: make([]metricdata.Metrics, 0, len(hs))}
	var next map[pointKey]telemetry.HistogramPoint
	if p.delta {
		next = make(map[pointKey]telemetry.HistogramPoint, len(p.prev))
	}
	for _, h := range hs {
		data := metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
			DataPoints: make([]metricdata.HistogramDataPoint[float64], 0, len(h.Points))}
		start := h.Start
		if p.delta {
			data.Temporality = metricdata.DeltaTemporality
			if !p.last.IsZero() {
				start = p.last
			}
		}
		for _, pt := range h.Points {
			dp := metricdata.HistogramDataPoint[float64]{Attributes: pt.Attributes, StartTime: start, Time: now,
				Bounds: h.Bounds, Count: pt.Count, Sum: pt.Sum, BucketCounts: pt.Buckets,
				Min: metricdata.NewExtrema(pt.Min), Max: metricdata.NewExtrema(pt.Max)}
			if p.delta {
				k := pointKey{h.Name, pt.Attributes.Equivalent()}
				next[k] = pt
				if !deltaSince(&dp, p.prev[k]) {
					continue
				}
			}
			data.DataPoints = append(data.DataPoints, dp)
		}
		// Like the SDK, a histogram nothing was recorded into is not
		// exported.
		if len(data.DataPoints) > 0 {
			sm.Metrics = append(sm.Metrics, metricdata.Metrics{Name: h.Name, Description: h.Description, Unit: h.Unit, Data: data})
		}
	}
	if p.delta {
		p.prev, p.last = next, now
	}
	if len(sm.Metrics) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{sm}, nil
}

// deltaSince turns dp's cumulative figures into those recorded since prev,
// and reports whether there were any (a series without new values is not
// exported, as the SDK's delta aggregation does). The smallest and
// largest value of an interval cannot be told from the cumulative
// extremes, so a delta point has none.
func deltaSince(dp *metricdata.HistogramDataPoint[float64], prev telemetry.HistogramPoint) bool {
	if dp.Count <= prev.Count {
		return false
	}
	dp.Count -= prev.Count
	dp.Sum -= prev.Sum
	buckets := make([]uint64, len(dp.BucketCounts))
	for i, n := range dp.BucketCounts {
		buckets[i] = n
		if i < len(prev.Buckets) {
			buckets[i] -= prev.Buckets[i]
		}
	}
	dp.BucketCounts = buckets
	dp.Min, dp.Max = metricdata.Extrema[float64]{}, metricdata.Extrema[float64]{}
	return true
}
