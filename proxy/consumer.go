package proxy

import (
	"net/http"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
)

// Consumers on the request path: the answer to an API key no consumer
// owns, and the headers that name the consumer to the upstream.

// identityKey is the context key under which a forwarded request carries
// its identity to the route's Rewrite.
type identityKey struct{}

// unknownKey answers a request whose API key no registered consumer owns
// (unknown_api_key = "reject"): 401 with a problem body and a challenge
// naming the header, before any limit counts it.
func unknownKey(w http.ResponseWriter, ev *Event, p *policy.Policy) {
	ev.Outcome = OutcomeUnauthorized
	w.Header()["Www-Authenticate"] = p.Consumers.Challenge
	headers.WriteProblem(w, headers.Problem{
		Status: http.StatusUnauthorized,
		Title:  "Unauthorized",
		Detail: "unknown API key",
	})
}

// forwardsConsumer reports whether the upstream is told id's consumer or
// plan.
func forwardsConsumer(c *policy.Consumers, id *keys.Identity) bool {
	return (c.ForwardConsumer != "" && id.Consumer != nil) || (c.ForwardPlan != "" && id.Plan != "")
}

// setConsumerHeaders sets the forwarded consumer headers from the
// identity the request carries (ownedHeaders.strip has removed the
// client's copies).
func setConsumerHeaders(c *policy.Consumers, in *http.Request, out http.Header) {
	if c.ForwardConsumer == "" && c.ForwardPlan == "" {
		return
	}
	id, _ := in.Context().Value(identityKey{}).(*keys.Identity)
	if id == nil {
		return
	}
	if c.ForwardConsumer != "" && id.Consumer != nil {
		out[c.ForwardConsumer] = []string{id.Consumer.Name}
	}
	if c.ForwardPlan != "" && id.Plan != "" {
		out[c.ForwardPlan] = []string{id.Plan}
	}
}
