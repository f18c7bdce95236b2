package policy

import (
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// AlgorithmAdaptive is the algorithm name of an adaptive concurrency
// limit. It is no ratelimit.Algorithm: the limit is decided in each
// gateway by package adaptive from the upstream's latency, never by a
// store.
const AlgorithmAdaptive = "adaptive_concurrency"

// Adaptive is a compiled adaptive_concurrency limit.
type Adaptive struct {
	// Config is the limiter's settings (floor, ceiling, reserve).
	Config adaptive.Config
	// MaxDelay is the longest a request waits for a slot before it is
	// shed; 0 sheds at once.
	MaxDelay time.Duration
	// PerRoute keeps one limiter per route (by = ["route"]) rather than
	// one for every route the limit applies to (by = []).
	PerRoute bool
	// PriorityHeader is the canonical name of the priority header; ""
	// for none. TrustedFrom, when not empty, are the peers it is believed
	// from.
	PriorityHeader string
	TrustedFrom    []netip.Prefix
	// plans are the priorities of plans by index (from zero); a plan
	// without one is noPriority.
	plans []int8
}

// noPriority marks a plan or route that names no priority class.
const noPriority int8 = -1

// adaptiveDefaultMax is max_in_flight's default for adaptive_concurrency.
const adaptiveDefaultMax = 1000

// buildAdaptive compiles an adaptive_concurrency limit. Its
// ratelimit.Limit is a concurrency limit at the ceiling, which only names
// the limit (ID, Name) to the rest of the gateway: no hit of it reaches a
// store.
func buildAdaptive(c *config.LimitConfig, path string, e *problems) *Limit {
	max := c.MaxInFlight
	if max == 0 {
		max = adaptiveDefaultMax
	}
	rl := &ratelimit.Limit{Name: c.Name, Algorithm: ratelimit.Concurrency, MaxInFlight: max}
	l := &Limit{Limit: rl, Cost: 1}
	a := &Adaptive{Config: adaptive.Config{MinLimit: c.MinInFlight, MaxLimit: max, Reserve: c.Reserve}}
	l.Adaptive = a
	if !validName(c.Name, false) {
		e.add(path+".name", "invalid name %q (1..64 letters, digits, '-' and '_')", c.Name)
	}
	if len(c.Rates) > 0 {
		e.add(path+".rates", "adaptive_concurrency takes no rates: its limit is learned from the upstream's latency")
	}
	if c.MaxInFlight < 0 || c.MaxInFlight > 1<<20 {
		e.add(path+".max_in_flight", "must be in 1..1048576, got %d", c.MaxInFlight)
	}
	switch {
	case c.MinInFlight < 0:
		e.add(path+".min_in_flight", "must be positive, got %d", c.MinInFlight)
	case c.MinInFlight > max:
		e.add(path+".min_in_flight", "%d exceeds max_in_flight %d", c.MinInFlight, max)
	}
	if c.Reserve < 0 || c.Reserve > 0.5 || c.Reserve != c.Reserve {
		e.add(path+".reserve", "must be in 0..0.5, got %v", c.Reserve)
	}
	switch len(c.By) {
	case 0:
	case 1:
		if c.By[0] == "route" {
			a.PerRoute = true
			l.By = []keys.Part{{Kind: keys.PartRoute}}
			break
		}
		fallthrough
	default:
		e.add(path+".by", "adaptive_concurrency keys by [] (one limit for the upstream) or [\"route\"], got %q: a limit learned per client would need every client's traffic to learn from", c.By)
	}
	switch c.Mode {
	case "enforce", "":
	case "shadow":
		rl.Shadow = true
	default:
		e.add(path+".mode", "unknown mode %q (want enforce or shadow)", c.Mode)
	}
	if c.MaxDelay != "" {
		a.MaxDelay = duration(c.MaxDelay, path+".max_delay", true, e)
	}
	if c.PriorityHeader != "" {
		if !validHeaderName(c.PriorityHeader) {
			e.add(path+".priority_header", "invalid header name %q", c.PriorityHeader)
		}
		a.PriorityHeader = canonicalHeader(c.PriorityHeader)
	} else if len(c.PriorityTrustedFrom) > 0 {
		e.add(path+".priority_trusted_from", "applies only with priority_header")
	}
	a.TrustedFrom = prefixes(c.PriorityTrustedFrom, path+".priority_trusted_from", e)
	// What the other algorithms take and this one cannot use.
	for _, f := range []struct {
		set  bool
		name string
	}{
		{c.CostHeader != "", "cost_header"}, {c.Cost > 1, "cost"}, {c.Burst != 0, "burst"},
		{c.Precision != "", "precision"}, {c.Penalty != "", "penalty"},
		{c.Count == "response", "count"}, {c.OnLimit == "delay", "on_limit"},
		{c.Sync == "batched", "sync"}, {len(c.PlanRates) > 0, "plan_rates"},
		{c.Timezone != "" || c.MonthStartsOn != 0, "timezone"},
	} {
		if f.set {
			e.add(path+"."+f.name, "does not apply to adaptive_concurrency")
		}
	}
	rl.Scope = limitScope(l)
	if err := rl.Finish(); err != nil {
		e.add(path, "%v", err)
	}
	return l
}

// compilePriorities checks the plans' and routes' priority classes and
// hands the plans' to every adaptive limit, and warns of a priority header
// believed from anyone.
func compilePriorities(p *Policy, c *config.Config, e *problems) {
	plans := make([]int8, len(c.Plans))
	for i, pc := range c.Plans {
		plans[i] = parsePriority(pc.Priority, fmt.Sprintf("plans[%d].priority", i), e)
	}
	for i, l := range p.Limits {
		if l.Adaptive == nil {
			continue
		}
		l.Adaptive.plans = plans
		if l.Adaptive.PriorityHeader != "" && len(l.Adaptive.TrustedFrom) == 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("limits[%d]: priority_header %s is believed from every client, so any client may call its requests critical; set priority_trusted_from to the proxies that set it", i, l.Adaptive.PriorityHeader))
		}
	}
	for i, rt := range p.Routes {
		rt.priority = parsePriority(c.Routes[i].Priority, fmt.Sprintf("routes[%d].priority", i), e)
	}
}

func parsePriority(s, path string, e *problems) int8 {
	if s == "" {
		return noPriority
	}
	pr, ok := adaptive.ParsePriority(s)
	if !ok || pr.String() != s {
		e.add(path, "unknown priority %q (want critical, normal or sheddable)", s)
		return noPriority
	}
	return int8(pr)
}

// splitAdaptive moves the adaptive limits out of a route's list: they are
// decided apart from the store's.
func splitAdaptive(ls []*Limit) (stored, adaptive []*Limit) {
	for _, l := range ls {
		if l.Adaptive != nil {
			adaptive = append(adaptive, l)
		} else {
			stored = append(stored, l)
		}
	}
	return stored, adaptive
}

// Priority returns the class of a request on rt under the adaptive limit
// a: the value of a's priority header when the direct peer (RemoteAddr)
// may set it, else the client's plan's class, else the route's, else
// normal. An unknown header value counts as absent.
func (a *Adaptive) Priority(rt *Route, id *keys.Identity, h http.Header, peer string) adaptive.Priority {
	if a.PriorityHeader != "" {
		if vs := h[a.PriorityHeader]; len(vs) == 1 && (len(a.TrustedFrom) == 0 || peerIn(peer, a.TrustedFrom)) {
			if pr, ok := adaptive.ParsePriority(vs[0]); ok {
				return pr
			}
		}
	}
	if i := id.PlanIndex - 1; i >= 0 && i < len(a.plans) && a.plans[i] != noPriority {
		return adaptive.Priority(a.plans[i])
	}
	if rt != nil && rt.priority != noPriority {
		return adaptive.Priority(rt.priority)
	}
	return adaptive.Normal
}

// peerIn reports whether peer, a RemoteAddr, is in one of ps.
func peerIn(peer string, ps []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(peer)
	var a netip.Addr
	if err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(peer); err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
