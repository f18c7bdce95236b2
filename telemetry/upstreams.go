package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names of the routes' upstream targets.
const (
	MetricUpstreamHealthy         = "tollgate.upstream.healthy"
	MetricUpstreamHealthChecks    = "tollgate.upstream.health_checks"
	MetricUpstreamResolveFailures = "tollgate.upstream.resolve_failures"
)

// UpstreamTarget is one upstream target's figures, as the registry reports
// them at a collection. Route, Target and Address are bounded by the
// configuration (and by the addresses one DNS name may become), never by
// clients.
type UpstreamTarget struct {
	// Route is the route's name; Target the configured URL; Address the
	// address requests go to (the URL's host:port, resolved).
	Route, Target, Address string
	// Healthy reports whether the target takes requests.
	Healthy bool
	// ChecksPassed and ChecksFailed count its health probes.
	ChecksPassed, ChecksFailed uint64
}

// UpstreamName is the DNS state of one configured target whose host is a
// name.
type UpstreamName struct {
	// Route is the route's name, Target the configured URL.
	Route, Target string
	// Failures counts the lookups that failed or answered no address.
	Failures uint64
}

// RegisterUpstreamStats exports the upstream targets' health and the DNS
// lookups' failures as observable instruments on meter; read is called at
// each collection, off the request path. Unregister the returned
// registration when the registry closes.
func RegisterUpstreamStats(meter metric.Meter, read func() ([]UpstreamTarget, []UpstreamName)) (metric.Registration, error) {
	healthy, e1 := meter.Int64ObservableGauge(MetricUpstreamHealthy,
		metric.WithDescription("1 when the upstream target takes requests (its health check passes and it is not ejected), else 0."))
	checks, e2 := meter.Int64ObservableCounter(MetricUpstreamHealthChecks, metric.WithUnit("{probe}"),
		metric.WithDescription("Active health probes of the upstream target, by result (pass or fail)."))
	resolve, e3 := meter.Int64ObservableCounter(MetricUpstreamResolveFailures, metric.WithUnit("{lookup}"),
		metric.WithDescription("DNS lookups of an upstream target's name that failed or answered no address (its last addresses are kept)."))
	if err := errors.Join(e1, e2, e3); err != nil {
		return nil, err
	}
	pass, fail := attribute.String("result", "pass"), attribute.String("result", "fail")
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		targets, names := read()
		for _, t := range targets {
			route, target, addr := attribute.String("route", t.Route), attribute.String("target", t.Target), attribute.String("address", t.Address)
			v := int64(0)
			if t.Healthy {
				v = 1
			}
			o.ObserveInt64(healthy, v, metric.WithAttributes(route, target, addr))
			if t.ChecksPassed+t.ChecksFailed > 0 {
				o.ObserveInt64(checks, int64(t.ChecksPassed), metric.WithAttributes(route, target, addr, pass))
				o.ObserveInt64(checks, int64(t.ChecksFailed), metric.WithAttributes(route, target, addr, fail))
			}
		}
		for _, n := range names {
			o.ObserveInt64(resolve, int64(n.Failures), metric.WithAttributes(attribute.String("route", n.Route), attribute.String("target", n.Target)))
		}
		return nil
	}, healthy, checks, resolve)
}
