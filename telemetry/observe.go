package telemetry

import (
	"context"
	"time"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// Observe records one finished request: its duration by route, method class
// and outcome; one decision per hit; near-limit hits; the store call's
// latency and error. It implements proxy.Observer.
func (m *Metrics) Observe(ev *proxy.Event) {
	if m == nil {
		return
	}
	ctx := context.Background()
	outcome := ev.Outcome.String()
	shadowDenied := false
	for i := range ev.Hits {
		if i >= len(ev.Decisions) {
			break
		}
		l, d := ev.Hits[i].Limit, &ev.Decisions[i]
		if l == nil {
			continue
		}
		if l.Shadow && !d.Allowed {
			shadowDenied = true
		}
		m.decisionCounts.add(limitKey{l.Name, d.Allowed, l.Shadow, ev.Plan}, limitAttrs)
		if d.Allowed && nearLimit(d) {
			m.nearCounts.add(l.Name, nearAttrs)
		}
	}
	if shadowDenied && ev.Outcome == proxy.OutcomeForwarded {
		outcome = OutcomeShadowLimited
	}
	m.reqDur.record(reqKey{route: ev.Route, method: MethodClass(ev.Method), outcome: outcome}, ev.Duration)
	if ev.StoreLatency > 0 || ev.StoreErr != nil {
		m.storeDur.record(struct{}{}, ev.StoreLatency)
	}
	if ev.StoreErr != nil {
		m.storeErrs.Add(ctx, 1, m.storeErrAttrs[storeErrKind(ev.StoreErr)].add...)
	}
	if ev.Upstream > 0 {
		m.Upstream(ev.Route, ev.Upstream)
	}
	if ev.Delay > 0 {
		m.delayed.Add(ctx, 1, m.routeAttrs.get(ev.Route, newRouteOpts).add...)
		m.delayDur.record(ev.Route, ev.Delay)
	}
	if ev.IPFallback {
		m.ClientIPFallback()
	}
	if ev.Retries > 0 {
		m.retries.Add(ctx, int64(ev.Retries), m.routeAttrs.get(ev.Route, newRouteOpts).add...)
	}
}

// nearLimit reports whether an allowed decision left at most 10% of its
// window.
func nearLimit(d *ratelimit.Decision) bool {
	return d.Limit > 0 && d.Remaining*10 <= d.Limit
}

// Begin counts a request in flight; call End when it finishes.
func (m *Metrics) Begin() {
	if m != nil {
		m.active.Add(1)
	}
}

// End ends a request counted by Begin.
func (m *Metrics) End() {
	if m != nil {
		m.active.Add(-1)
	}
}

// Upstream records the duration of one upstream exchange of route.
func (m *Metrics) Upstream(route string, d time.Duration) {
	if m != nil {
		m.upstreamDur.record(route, d)
	}
}

// ClientIPFallback counts a request whose selected X-Forwarded-For entry
// was invalid, so that the peer address identified the client.
func (m *Metrics) ClientIPFallback() {
	if m != nil {
		m.ipFallback.Add(context.Background(), 1)
	}
}

// Reload counts one configuration reload, successful or not.
func (m *Metrics) Reload(ok bool) {
	if m == nil {
		return
	}
	i := 0
	if ok {
		i = 1
	}
	m.reloads.Add(context.Background(), 1, m.reloadAttrs[i].add...)
}

// JWKSFetched counts a fetch of the identity provider's key set by
// result.
func (m *Metrics) JWKSFetched(ok bool) {
	if m == nil {
		return
	}
	i := 0
	if ok {
		i = 1
	}
	m.jwksFetch.Add(context.Background(), 1, m.reloadAttrs[i].add...)
}

// MethodClass maps a request method to a bounded label, as the semantic
// conventions do: a known method is itself, anything else is "_OTHER".
func MethodClass(method string) string {
	switch method {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return method
	}
	return "_OTHER"
}
