package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// QuotaAnswer is the body of a quota route's answer: the caller's own
// budget on every route it reports.
type QuotaAnswer struct {
	// Client is the kind of identity the caller was known by ("api_key",
	// "user", "ip", "consumer"); its value is not echoed.
	Client string `json:"client"`
	// Consumer and Plan are the caller's registered consumer and plan,
	// omitted when none.
	Consumer string `json:"consumer,omitempty"`
	Plan     string `json:"plan,omitempty"`
	// Routes are the routes reported, in configuration order.
	Routes []QuotaRoute `json:"routes"`
}

// QuotaRoute is one route of a quota answer.
type QuotaRoute struct {
	// Route is the route's name.
	Route string `json:"route"`
	// Limits are the route's limits, gateway-wide ones first.
	Limits []QuotaLimit `json:"limits"`
}

// QuotaLimit is one limit as it applies to the caller.
type QuotaLimit struct {
	// Limit is the limit's name.
	Limit string `json:"limit"`
	// Algorithm is its algorithm.
	Algorithm string `json:"algorithm"`
	// Mode is "enforce" or "shadow".
	Mode string `json:"mode"`
	// Exempt is set when the caller is exempt from it (no windows).
	Exempt bool `json:"exempt,omitempty"`
	// Rejected says what a request of the caller lacks for this limit,
	// which answers such requests 401 (no windows).
	Rejected string `json:"rejected,omitempty"`
	// OverrideExpires is the expiry of the override whose numbers apply to
	// the caller, if one does (RFC 3339).
	OverrideExpires string `json:"override_expires,omitempty"`
	// Windows are the caller's windows of the limit.
	Windows []headers.Window `json:"windows,omitempty"`
}

// quota answers a quota route: the caller's budget on the routes its
// Quota names, read from the store without counting anything. The caller
// is identified exactly as the live path identifies it (nothing in the
// query or body can name another client), and its counter keys are built
// by the same calls, with the quota request's own method and headers for
// the limits keyed by them.
func (h *Handler) quota(w http.ResponseWriter, r *http.Request, snap *snapshot, rt *policy.Route, q *request, now time.Time) {
	p := snap.p
	id := p.Identity.Identify(r, h.identityClock(p))
	var ovs *override.Table
	if h.overrides != nil {
		ovs = h.overrides.For(p)
	}
	type counter struct {
		l   *ratelimit.Limit
		key string
	}
	read := map[counter][]ratelimit.WindowUsage{}
	if id.Rejected {
		// An API key no consumer owns, under unknown_api_key = "reject":
		// the same 401 as on every route.
		unknownKey(w, &q.ev, p)
		return
	}
	ans := QuotaAnswer{Client: id.ClientKind.String(), Consumer: id.ConsumerName(), Plan: id.Plan,
		Routes: make([]QuotaRoute, 0, len(rt.Respond.Quota.Routes))}
	var key []byte
	for _, target := range rt.Respond.Quota.Routes {
		qr := QuotaRoute{Route: target.Name, Limits: make([]QuotaLimit, 0, len(target.Limits))}
		for _, l := range target.Limits {
			ql := QuotaLimit{Limit: l.Name, Algorithm: l.Algorithm.String(), Mode: "enforce"}
			if l.Shadow {
				ql.Mode = "shadow"
			}
			parts, ok := l.KeyParts(&id, r.Header)
			switch {
			case l.Exempt(&id):
				ql.Exempt = true
			case !ok:
				ql.Rejected = "requests without " + keys.MissingNames(l.By) + " are answered 401"
			default:
				key = p.Identity.AppendKey(key[:0], parts, &id, &keys.Values{Route: target.Name, Method: r.Method, Header: r.Header})
				c := counter{l.For(&id), string(key)}
				if ov := h.override(ovs, p, l, parts, c.key, &id); ov != nil {
					c.l = ov.Limit
					ql.OverrideExpires = ov.Record.Expires.UTC().Format(time.RFC3339)
				}
				ws, done := read[c]
				if !done {
					var err error
					ws, err = h.usage(r.Context(), p, now, c.l, c.key)
					if err != nil {
						h.logStoreError(err, p.Store.OnError, now)
						w.Header()["Retry-After"] = headers.IntValue(1)
						headers.WriteProblem(w, headers.Problem{Status: http.StatusServiceUnavailable, Title: "Service Unavailable",
							Detail: "rate-limit store unavailable; retry in 1s", RetryAfter: 1})
						return
					}
					read[c] = ws
				}
				ql.Windows = headers.Windows(c.l, ws, now)
			}
			qr.Limits = append(qr.Limits, ql)
		}
		ans.Routes = append(ans.Routes, qr)
	}
	body, err := json.Marshal(ans)
	if err != nil {
		headers.WriteProblem(w, headers.Problem{Status: http.StatusInternalServerError, Detail: "encoding the quota failed"})
		return
	}
	hd := w.Header()
	hd["Content-Type"] = []string{"application/json"}
	hd["Cache-Control"] = []string{"no-store"}
	hd["X-Content-Type-Options"] = []string{"nosniff"}
	hd["Content-Length"] = []string{strconv.Itoa(len(body) + 1)}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// usage reads one counter under the store's budget.
func (h *Handler) usage(ctx context.Context, p *policy.Policy, now time.Time, l *ratelimit.Limit, key string) ([]ratelimit.WindowUsage, error) {
	if !h.nonBlocking {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Store.Timeout)
		defer cancel()
	}
	return h.store.Usage(ctx, now, l, key)
}
