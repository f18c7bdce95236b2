package proxy

import (
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// limitFor returns the limit that decides a request of l whose key parts
// are parts and counter key is key: the override in force for its
// consumer or client, if any, else base (l's variant for the identity,
// l.For). Without overrides of l it costs one map lookup.
func (h *Handler) limitFor(ovs *override.Table, p *policy.Policy, l *policy.Limit, base *ratelimit.Limit, parts []keys.Part, key string, id *keys.Identity) *ratelimit.Limit {
	if ov := h.override(ovs, p, l, parts, key, id); ov != nil {
		return ov.Limit
	}
	return base
}

// override returns the override of l in force for the request, or nil.
func (h *Handler) override(ovs *override.Table, p *policy.Policy, l *policy.Limit, parts []keys.Part, key string, id *keys.Identity) *override.Compiled {
	lo := ovs.For(l)
	if lo == nil {
		return nil
	}
	subject := ""
	if lo.NeedsSubject() {
		subject = lo.Subject(p.Identity, parts, key, id)
	}
	// Overrides expire on the wall clock: their expiry is an instant the
	// operator named.
	return lo.Find(h.wallNow(), id.ConsumerName(), subject)
}

// variedPolicy is the RateLimit-Policy value of the limits that decided a
// request, for a request whose limits are not the route's own.
func variedPolicy(hits []ratelimit.Hit, now time.Time) string {
	ls := make([]*ratelimit.Limit, len(hits))
	for i := range hits {
		ls[i] = hits[i].Limit
	}
	return headers.PolicyValueAt(ls, now)
}
