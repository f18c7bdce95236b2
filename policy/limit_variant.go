package policy

import (
	"fmt"
	"slices"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// For returns the definition of l that applies to a request with identity
// id: the rates of id's consumer of its own ([consumers.rates]), else
// those of its plan ([limits.plan_rates]), else l's. Each is a Finished
// ratelimit.Limit built at compile time with l's name, algorithm and
// scope, so a variant with l's windows has l's ID and counts in the same
// counters: a consumer moved to another plan keeps its usage. It reads
// one field, at most one slice element and, for a consumer with rates of
// its own, one map entry; it does not allocate.
//
// Everything that picks a per-request variant of a limit goes through
// here, so that a new source of rates (an override) is one more case.
func (l *Limit) For(id *keys.Identity) *ratelimit.Limit {
	if c := id.Consumer; c != nil && c.Custom {
		if v := l.custom[c]; v != nil {
			return v
		}
	}
	if i := id.PlanIndex - 1; i >= 0 && i < len(l.plans) {
		if v := l.plans[i]; v != nil {
			return v
		}
	}
	return l.Limit
}

// Variants returns l's definition and every variant For can return, for
// whatever keeps state per definition (shadow-denial logs, replay
// tallies) to register them all.
func (l *Limit) Variants() []*ratelimit.Limit {
	out := []*ratelimit.Limit{l.Limit}
	for _, v := range l.plans {
		if v != nil {
			out = append(out, v)
		}
	}
	for _, v := range l.custom {
		out = append(out, v)
	}
	return out
}

// PlanRates returns l's rates for the plan at index i (from one, as
// keys.Identity.PlanIndex counts), or nil when the plan gets l's own.
func (l *Limit) PlanRates(i int) []ratelimit.Rate {
	if i < 1 || i > len(l.plans) || l.plans[i-1] == nil {
		return nil
	}
	return l.plans[i-1].Rates
}

// buildPlanRates compiles [limits.plan_rates]: one variant of l per plan
// listed, at its plan's index.
func buildPlanRates(l *Limit, c *config.LimitConfig, plans []string, path string, e *problems) {
	if len(c.PlanRates) == 0 || l.ID == "" {
		return
	}
	names := make([]string, 0, len(c.PlanRates))
	for name := range c.PlanRates {
		names = append(names, name)
	}
	slices.Sort(names) // problems in a stable order
	l.plans = make([]*ratelimit.Limit, len(plans))
	for _, name := range names {
		field := path + ".plan_rates." + name
		i := slices.Index(plans, name)
		if i < 0 {
			e.add(field, "unknown plan %q (want one of the [[plans]])", name)
			continue
		}
		l.plans[i] = variant(l, c.PlanRates[name], field, e)
	}
}

// variant parses rates and builds l's variant counting by them; problems
// go to field.
func variant(l *Limit, rates []string, field string, e *problems) *ratelimit.Limit {
	if len(rates) == 0 {
		e.add(field, "at least one rate is required")
		return nil
	}
	var rs []ratelimit.Rate
	for i, s := range rates {
		r, err := ratelimit.ParseRate(s)
		if err != nil {
			e.add(fmt.Sprintf("%s[%d]", field, i), "%v", err)
			continue
		}
		rs = append(rs, r)
	}
	if len(rs) < len(rates) {
		return nil
	}
	return variantOf(l, rs, field, e)
}

// variantOf builds l's variant with parsed rates and checks that l's cost
// fits in each of its windows, as for l itself.
func variantOf(l *Limit, rs []ratelimit.Rate, field string, e *problems) *ratelimit.Limit {
	for i, r := range rs {
		for _, prev := range rs[:i] {
			if prev.Window == r.Window {
				e.add(fmt.Sprintf("%s[%d]", field, i), "window %s appears twice", r.Window)
				return nil
			}
		}
	}
	v, err := l.WithRates(rs)
	if err != nil {
		e.add(field, "%v", err)
		return nil
	}
	if msg := l.checkRedisLog(v); msg != "" {
		e.add(field, "%s", msg)
		return nil
	}
	for i, r := range v.Rates {
		if capacity := v.Capacity(i); l.Cost > capacity {
			// v's windows are sorted (Finish), not as listed: name the
			// rate where the configuration lists it.
			at := slices.IndexFunc(rs, func(c ratelimit.Rate) bool { return c.Window == r.Window })
			e.add(fmt.Sprintf("%s[%d]", field, at), "cost %d exceeds capacity %d, so every request would be denied", l.Cost, capacity)
			return nil
		}
	}
	return v
}

// RateLimitPolicyFor returns the RateLimit-Policy header value of the
// route's limits as they apply to id: built once per plan at compile
// time; built per request only for a consumer with rates of its own.
func (rt *Route) RateLimitPolicyFor(id *keys.Identity) string {
	if c := id.Consumer; c != nil && c.Custom {
		rl := make([]*ratelimit.Limit, len(rt.Limits))
		for i, l := range rt.Limits {
			rl[i] = l.For(id)
		}
		return headers.PolicyValue(rl)
	}
	if i := id.PlanIndex - 1; i >= 0 && i < len(rt.planPolicies) {
		return rt.planPolicies[i]
	}
	return rt.RateLimitPolicy
}

// buildPlanPolicies fills the route's RateLimit-Policy values per plan.
func buildPlanPolicies(rt *Route, plans int) {
	if plans == 0 {
		return
	}
	rt.planPolicies = make([]string, plans)
	rl := make([]*ratelimit.Limit, len(rt.Limits))
	for i := range plans {
		id := keys.Identity{PlanIndex: i + 1}
		for k, l := range rt.Limits {
			rl[k] = l.For(&id)
		}
		rt.planPolicies[i] = headers.PolicyValue(rl)
	}
}
