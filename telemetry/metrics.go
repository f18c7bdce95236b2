// Package telemetry is Tollgate's instrumentation: OpenTelemetry metrics
// (Metrics, a proxy.Observer) and tracing helpers (Tracing) written against
// the OpenTelemetry API only. The SDK, the exporters and their configuration
// belong to cmd/gateway; with the API's no-op providers everything here
// costs next to nothing.
//
// Label values are bounded: route and limit names from the configuration,
// method classes, outcomes and a few fixed words — never a client identity,
// a path or an upstream status.
package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names. They follow the OpenTelemetry semantic conventions where one
// exists (http.server.request.duration); the rest live under "tollgate.".
const (
	MetricRequestDuration  = "http.server.request.duration"
	MetricActiveRequests   = "http.server.active_requests"
	MetricDecisions        = "tollgate.decisions"
	MetricNearLimit        = "tollgate.near_limit"
	MetricStoreDuration    = "tollgate.store.duration"
	MetricStoreErrors      = "tollgate.store.errors"
	MetricUpstreamDuration = "tollgate.upstream.duration"
	MetricStoreKeys        = "tollgate.store.memory.keys"
	MetricStoreEvictions   = "tollgate.store.memory.evictions"
	MetricStoreBytes       = "tollgate.store.memory.bytes"
	MetricConfigReloads    = "tollgate.config.reloads"
	MetricClientIPFallback = "tollgate.client_ip_fallback"
	MetricDelayed          = "tollgate.delayed"
	MetricDelayDuration    = "tollgate.delay.duration"
	MetricJWKSRefreshes    = "tollgate.jwks.refreshes"
	MetricJWKSKeys         = "tollgate.jwks.keys"
	MetricJWKSLastSuccess  = "tollgate.jwks.last_success_timestamp"
	MetricUpstreamRetries  = "tollgate.upstream.retries"
)

// Attribute keys.
const (
	AttrRoute     = attribute.Key("http.route")
	AttrMethod    = attribute.Key("http.request.method")
	AttrOutcome   = attribute.Key("tollgate.outcome")
	AttrLimit     = attribute.Key("tollgate.limit")
	AttrDecision  = attribute.Key("tollgate.decision")
	AttrMode      = attribute.Key("tollgate.mode")
	AttrErrorType = attribute.Key("error.type")
	AttrResult    = attribute.Key("tollgate.result")
	// AttrPlan is the client's plan ([[plans]]) on decisions; absent for
	// clients without one.
	AttrPlan = attribute.Key("tollgate.plan")
)

// OutcomeShadowLimited is the outcome label of a request that was forwarded
// although a shadow limit would have denied it.
const OutcomeShadowLimited = "shadow_limited"

// durationBuckets are the semantic conventions' advisory boundaries for
// HTTP durations, in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// storeBuckets resolve the store's sub-millisecond to budget-sized calls.
var storeBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// MetricsOptions configures NewMetrics.
type MetricsOptions struct {
	// LiveKeys, when set, reports the number of keys in the in-memory store;
	// it is called at each collection, off the request path. Nil: the gauge
	// is not registered.
	LiveKeys func() int64
	// Bytes, when set, reports the bytes the in-memory store's keys are
	// charged (bounded by store.memory.max_bytes). Nil: the gauge is not
	// registered.
	Bytes func() int64
	// Evictions, when set, reports how many live keys the in-memory store
	// has evicted to stay within max_keys (a key-rotation attack shows
	// here). Nil: the counter is not registered.
	Evictions func() int64
	// JWKS, when set, reports the identity provider's key set: the keys
	// held and when they were fetched, ok false while there is none (no
	// jwks_url or oidc_issuer: nothing is observed). Called at collection.
	JWKS func() (keys int64, lastSuccess time.Time, ok bool)
}

// Metrics records Tollgate's metrics. It implements proxy.Observer; its
// other methods are called by the proxy (Begin, End, Upstream,
// ClientIPFallback) and by the reload logic (Reload). Attribute sets are
// computed once per label combination and cached, so recording allocates
// nothing once a combination has been seen. A nil *Metrics records nothing.
// Metrics is safe for concurrent use.
//
// The duration histograms are aggregated here, not by the meter: they
// reach the exporters only through Histograms, which the wiring hands to
// the SDK's readers.
type Metrics struct {
	active     atomic.Int64 // requests in flight, read at collection
	decisions  metric.Int64ObservableCounter
	nearLimit  metric.Int64ObservableCounter
	storeErrs  metric.Int64Counter
	reloads    metric.Int64Counter
	ipFallback metric.Int64Counter
	delayed    metric.Int64Counter
	jwksFetch  metric.Int64Counter
	retries    metric.Int64Counter
	reg        metric.Registration

	start       time.Time
	reqDur      *histogram[reqKey]
	storeDur    *histogram[struct{}]
	upstreamDur *histogram[string]
	delayDur    *histogram[string]

	// The decision and near-limit counts, one atomic per label set,
	// observed at collection (see counters).
	decisionCounts counters[limitKey]
	nearCounts     counters[string]
	routeAttrs     cache[string] // the delayed counter's
	storeErrAttrs  [storeErrKinds]opts
	reloadAttrs    [2]opts // also the JWKS refreshes'
}

// NewMetrics creates every instrument from meter.
func NewMetrics(meter metric.Meter, o MetricsOptions) (*Metrics, error) {
	m := &Metrics{
		start:       time.Now(),
		reqDur:      newHistogram(MetricRequestDuration, "Duration of HTTP server requests, by route, method and gateway outcome.", durationBuckets, reqAttrs),
		storeDur:    newHistogram(MetricStoreDuration, "Duration of rate-limit store calls.", storeBuckets, noAttrs),
		upstreamDur: newHistogram(MetricUpstreamDuration, "Duration of upstream exchanges, by route.", durationBuckets, routeAttrs),
		delayDur:    newHistogram(MetricDelayDuration, "Time requests waited for the slot a delay limit reserved before they were forwarded, by route.", durationBuckets, routeAttrs),
	}
	var err, e error
	for _, c := range []struct {
		dst              *metric.Int64Counter
		name, unit, desc string
	}{
		{&m.storeErrs, MetricStoreErrors, "{error}", "Failed rate-limit store calls, by error.type (timeout, canceled, store)."},
		{&m.reloads, MetricConfigReloads, "{reload}", "Configuration reloads, by result (success, failure)."},
		{&m.delayed, MetricDelayed, "{request}", "Requests that waited for the slot a delay limit (on_limit = \"delay\") reserved before they were forwarded, by route."},
		{&m.ipFallback, MetricClientIPFallback, "{request}", "Requests whose selected X-Forwarded-For entry was invalid, so the peer address was used."},
		{&m.jwksFetch, MetricJWKSRefreshes, "{refresh}", "Fetches of the identity provider's key set (identity.jwt.jwks_url, oidc_issuer), by result (success, failure)."},
		{&m.retries, MetricUpstreamRetries, "{retry}", "Upstream attempts beyond a request's first, on another target after a failed one (routes with retries), by route."},
	} {
		*c.dst, e = meter.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
		err = errors.Join(err, e)
	}

	// Observed at collection, off the request path. In flight is an atomic
	// counter: two SDK calls per request fewer than a synchronous
	// UpDownCounter (bench/opscost), with the same exported sum.
	type observed struct {
		inst metric.Int64Observable
		read func() int64
	}
	var obs []observed
	// Decisions and near-limit decisions too: an atomic add per decision
	// instead of an SDK call, which checks and looks up its attribute set
	// on every call (bench/floor), for the same exported sums.
	m.decisions, e = meter.Int64ObservableCounter(MetricDecisions, metric.WithUnit("{decision}"),
		metric.WithDescription("Rate-limit decisions, by limit, decision (allowed, denied), mode (enforce, shadow) and the client's plan (when it has one)."))
	err = errors.Join(err, e)
	m.nearLimit, e = meter.Int64ObservableCounter(MetricNearLimit, metric.WithUnit("{decision}"),
		metric.WithDescription("Allowed decisions that left at most 10% of the reported window, by limit."))
	err = errors.Join(err, e)
	active, e := meter.Int64ObservableUpDownCounter(MetricActiveRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Number of requests in flight in the gateway."))
	err = errors.Join(err, e)
	obs = append(obs, observed{active, m.active.Load})
	if o.LiveKeys != nil {
		keys, e := meter.Int64ObservableGauge(MetricStoreKeys, metric.WithUnit("{key}"),
			metric.WithDescription("Live counter keys in the in-memory store."))
		err = errors.Join(err, e)
		obs = append(obs, observed{keys, o.LiveKeys})
	}
	if o.Bytes != nil {
		bytes, e := meter.Int64ObservableGauge(MetricStoreBytes, metric.WithUnit("By"),
			metric.WithDescription("Bytes charged to the counter keys of the in-memory store (bounded by store.memory.max_bytes)."))
		err = errors.Join(err, e)
		obs = append(obs, observed{bytes, o.Bytes})
	}
	if o.Evictions != nil {
		evictions, e := meter.Int64ObservableCounter(MetricStoreEvictions, metric.WithUnit("{key}"),
			metric.WithDescription("Keys evicted from the in-memory store to stay within store.memory.max_keys or max_bytes."))
		err = errors.Join(err, e)
		obs = append(obs, observed{evictions, o.Evictions})
	}
	var jwksKeys metric.Int64ObservableGauge
	var jwksLast metric.Float64ObservableGauge
	if o.JWKS != nil {
		jwksKeys, e = meter.Int64ObservableGauge(MetricJWKSKeys, metric.WithUnit("{key}"),
			metric.WithDescription("Usable keys in the identity provider's key set the gateway holds."))
		err = errors.Join(err, e)
		jwksLast, e = meter.Float64ObservableGauge(MetricJWKSLastSuccess, metric.WithUnit("s"),
			metric.WithDescription("When the key set held was fetched, in seconds since the epoch (0: never)."))
		err = errors.Join(err, e)
	}
	if err != nil {
		return nil, err
	}
	insts := []metric.Observable{m.decisions, m.nearLimit}
	for _, ob := range obs {
		insts = append(insts, ob.inst)
	}
	if o.JWKS != nil {
		insts = append(insts, jwksKeys, jwksLast)
	}
	jwksStatus := o.JWKS
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if jwksStatus != nil {
			if n, last, ok := jwksStatus(); ok {
				o.ObserveInt64(jwksKeys, n)
				var ts float64
				if !last.IsZero() {
					ts = float64(last.UnixNano()) / 1e9
				}
				o.ObserveFloat64(jwksLast, ts)
			}
		}
		for _, ob := range obs {
			o.ObserveInt64(ob.inst, ob.read())
		}
		m.decisionCounts.observe(o, m.decisions)
		m.nearCounts.observe(o, m.nearLimit)
		return nil
	}, insts...)
	if err != nil {
		return nil, err
	}
	for k := range m.storeErrAttrs {
		m.storeErrAttrs[k] = newOpts(AttrErrorType.String(storeErrNames[k]))
	}
	m.reloadAttrs[0] = newOpts(AttrResult.String("failure"))
	m.reloadAttrs[1] = newOpts(AttrResult.String("success"))
	return m, nil
}

// Histograms returns the duration histograms as they stand: request,
// store, upstream and delay durations, cumulative since NewMetrics. It is
// called at each collection, off the request path. Nil Metrics: none.
func (m *Metrics) Histograms() []Histogram {
	if m == nil {
		return nil
	}
	return []Histogram{m.reqDur.read(m.start), m.storeDur.read(m.start), m.upstreamDur.read(m.start), m.delayDur.read(m.start)}
}

// Close unregisters the callback of the in-flight and live-keys
// instruments.
func (m *Metrics) Close() error {
	if m == nil || m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}
