package policy

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/ratelimit"
)

// periodPolicy builds the RateLimit-Policy value of a route with quotas,
// whose windows are their calendar periods' lengths, and keeps the last
// one until the earliest of those periods ends.
type periodPolicy struct {
	limits []*ratelimit.Limit
	last   atomic.Pointer[periodValue]
}

// periodValue is a RateLimit-Policy value valid for instants (µs) in
// [from, until).
type periodValue struct {
	from, until int64
	value       string
}

// newPeriodPolicy returns the periodPolicy of limits, nil when none is a
// quota.
func newPeriodPolicy(limits []*ratelimit.Limit) *periodPolicy {
	for _, l := range limits {
		if l != nil && l.Algorithm == ratelimit.Quota && !l.Shadow {
			return &periodPolicy{limits: limits}
		}
	}
	return nil
}

// value returns the header value at now.
func (p *periodPolicy) value(now time.Time) string {
	t := now.UnixMicro()
	if v := p.last.Load(); v != nil && v.from <= t && t < v.until {
		return v.value
	}
	from, until := int64(math.MinInt64), int64(math.MaxInt64)
	for _, l := range p.limits {
		if l == nil || l.Algorithm != ratelimit.Quota || l.Shadow {
			continue
		}
		for i := range l.Rates {
			s, e, _ := l.PeriodAt(i, now)
			from, until = max(from, s.UnixMicro()), min(until, e.UnixMicro())
		}
	}
	v := &periodValue{from: from, until: until, value: headers.PolicyValueAt(p.limits, now)}
	p.last.Store(v)
	return v.value
}

// RateLimitPolicyAt returns the RateLimit-Policy header value for a
// response to client id at now: RateLimitPolicyFor(id), except that a
// quota's window is the length of its period containing now. (A route
// with quotas builds the value of a plan's or a consumer's own numbers
// per response.)
func (rt *Route) RateLimitPolicyAt(id *keys.Identity, now time.Time) string {
	if rt.quotaPolicy == nil {
		return rt.RateLimitPolicyFor(id)
	}
	if c := id.Consumer; (c != nil && c.Custom) || (id.PlanIndex > 0 && id.PlanIndex <= len(rt.planPolicies)) {
		rl := make([]*ratelimit.Limit, len(rt.Limits))
		for i, l := range rt.Limits {
			rl[i] = l.For(id)
		}
		return headers.PolicyValueAt(rl, now)
	}
	return rt.quotaPolicy.value(now)
}
