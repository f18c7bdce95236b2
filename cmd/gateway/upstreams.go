package main

import (
	"context"
	"net"
	"sort"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/gateway/telemetry"
	"github.com/tollgate/gateway/upstream"
)

// newResolver returns the resolver of the upstream names: the DNS server
// at addr (server.resolver), or nil for the system's.
func newResolver(addr string) upstream.Resolver {
	if addr == "" {
		return nil
	}
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		// The system's resolv.conf names its servers; this one replaces
		// them (network is udp, or tcp for a truncated answer).
		return d.DialContext(ctx, network, addr)
	}}
}

// upstreamTargetView is one target in /admin/upstreams, /readyz and the
// dashboard.
type upstreamTargetView struct {
	// Target is the configured URL; Address where requests go.
	Target  string `json:"target"`
	Address string `json:"address"`
	Weight  int    `json:"weight"`
	Healthy bool   `json:"healthy"`
	// InFlight is the number of requests being forwarded to it.
	InFlight     int64  `json:"in_flight"`
	ChecksPassed uint64 `json:"checks_passed"`
	ChecksFailed uint64 `json:"checks_failed"`
	// LastError is why its last health probe failed.
	LastError string `json:"last_error,omitempty"`
}

// upstreamNameView is one configured target whose host is a DNS name.
type upstreamNameView struct {
	Target    string   `json:"target"`
	Addresses []string `json:"addresses"`
	Failures  uint64   `json:"resolve_failures"`
	LastError string   `json:"last_error,omitempty"`
}

// upstreamRouteView is one forwarding route's targets.
type upstreamRouteView struct {
	Route       string `json:"route"`
	Balance     string `json:"balance"`
	HealthCheck bool   `json:"health_check"`
	// Healthy is the number of targets that take requests.
	Healthy int                  `json:"healthy"`
	Targets []upstreamTargetView `json:"targets"`
	// More is how many targets the dashboard's view leaves out (never
	// set in /admin/upstreams).
	More  int                `json:"more,omitempty"`
	Names []upstreamNameView `json:"names,omitempty"`
}

// dashboardTargets bounds the targets per route in the dashboard's data,
// fetched every second: the unhealthy first, then the others.
const dashboardTargets = 50

// dashboardUpstreams is upstreamsView bounded for the dashboard: at most
// dashboardTargets targets per route (the unhealthy first), no names.
func (g *gateway) dashboardUpstreams() []upstreamRouteView {
	out := g.upstreamsView()
	for i := range out {
		r := &out[i]
		r.Names = nil
		if len(r.Targets) <= dashboardTargets {
			continue
		}
		sort.SliceStable(r.Targets, func(a, b int) bool { return !r.Targets[a].Healthy && r.Targets[b].Healthy })
		r.More = len(r.Targets) - dashboardTargets
		r.Targets = r.Targets[:dashboardTargets]
	}
	return out
}

// upstreamsView returns every forwarding route's targets, by route name.
func (g *gateway) upstreamsView() []upstreamRouteView {
	pools := g.upstreams.Pools()
	out := make([]upstreamRouteView, 0, len(pools))
	for _, p := range pools {
		s := p.Spec()
		v := upstreamRouteView{Route: p.Route(), Balance: s.Balance.String(), HealthCheck: s.Health != nil}
		for _, t := range p.Targets() {
			tv := upstreamTargetView{Target: t.Name, Address: t.URL.Host, Weight: t.Weight, Healthy: t.Healthy(),
				InFlight: t.InFlight(), ChecksPassed: t.ProbesPassed(), ChecksFailed: t.ProbesFailed(), LastError: t.LastProbeError()}
			if tv.Healthy {
				v.Healthy++
			}
			v.Targets = append(v.Targets, tv)
		}
		for _, n := range p.Names() {
			nv := upstreamNameView{Target: n.Target, Failures: n.Failures, LastError: n.LastError, Addresses: []string{}}
			for _, a := range n.Addrs {
				nv.Addresses = append(nv.Addresses, a.String())
			}
			v.Names = append(v.Names, nv)
		}
		out = append(out, v)
	}
	return out
}

// maxUnreadyRoutes and maxUnreadyTargets bound /readyz's list of routes
// with no healthy target: enough to name the trouble, small for a probe.
const (
	maxUnreadyRoutes  = 10
	maxUnreadyTargets = 10
)

// unreadyRoute is a route /readyz names: none of its targets is healthy.
type unreadyRoute struct {
	Route   string               `json:"route"`
	Targets []upstreamTargetView `json:"targets"`
	// More is how many of its targets the list leaves out.
	More int `json:"more,omitempty"`
}

// unreadyUpstreams returns the forwarding routes none of whose targets is
// healthy (the first maxUnreadyRoutes, with their first targets) and how
// many there are in all.
func (g *gateway) unreadyUpstreams() ([]unreadyRoute, int) {
	var out []unreadyRoute
	n := 0
	for _, p := range g.upstreams.Pools() {
		if p.Healthy() > 0 {
			continue
		}
		n++
		if len(out) == maxUnreadyRoutes {
			continue
		}
		ur := unreadyRoute{Route: p.Route()}
		ts := p.Targets()
		for i, t := range ts {
			if i == maxUnreadyTargets {
				ur.More = len(ts) - i
				break
			}
			ur.Targets = append(ur.Targets, upstreamTargetView{Target: t.Name, Address: t.URL.Host, Weight: t.Weight,
				ChecksPassed: t.ProbesPassed(), ChecksFailed: t.ProbesFailed(), LastError: t.LastProbeError()})
		}
		out = append(out, ur)
	}
	return out, n
}

// registerUpstreams exports the targets' health and the DNS failures as
// metrics, read at each scrape, for the routes whose targets are
// balanced or probed (upstream.Pool.Watched): a route with one upstream
// and no health check has no series.
func (g *gateway) registerUpstreams(meter metric.Meter) (metric.Registration, error) {
	return telemetry.RegisterUpstreamStats(meter, func() ([]telemetry.UpstreamTarget, []telemetry.UpstreamName) {
		var ts []telemetry.UpstreamTarget
		var ns []telemetry.UpstreamName
		for _, p := range g.upstreams.Pools() {
			if !p.Watched() {
				continue
			}
			for _, t := range p.Targets() {
				ts = append(ts, telemetry.UpstreamTarget{Route: p.Route(), Target: t.Name, Address: t.URL.Host,
					Healthy: t.Healthy(), ChecksPassed: t.ProbesPassed(), ChecksFailed: t.ProbesFailed()})
			}
			for _, n := range p.Names() {
				ns = append(ns, telemetry.UpstreamName{Route: p.Route(), Target: n.Target, Failures: n.Failures})
			}
		}
		return ts, ns
	})
}
