package proxy

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// NonBlocking is implemented by stores whose calls never wait on I/O or
// on another request (the in-memory store): the handler then decides
// without a deadline, saving a timer per request.
type NonBlocking interface {
	NonBlocking() bool
}

// SelfTimed is implemented by stores that bound each call by a budget of
// their own, enforced where the call waits (the Redis store's timeout, on
// its sockets) without a timer: the handler sets no deadline of its own
// for a decision when that budget is within store.timeout, saving a
// timer per request.
type SelfTimed interface {
	CallTimeout() time.Duration
}

// InFlight counts requests in flight. Begin is called when a request
// arrives and End exactly once when it finishes.
type InFlight interface {
	Begin()
	End()
}

// Tracer creates the spans of a request: the server span, a child span for
// the store call, and the trace context propagated upstream.
type Tracer interface {
	// StartRequest starts the server span; the returned func ends it.
	StartRequest(ctx context.Context, r *http.Request) (context.Context, func(*Event))
	// StartStore starts the store call's span; the returned func ends it.
	StartStore(ctx context.Context, hits int) (context.Context, func(error))
	// Inject writes the trace context into the upstream request's header.
	Inject(ctx context.Context, h http.Header)
}

// Outcome is what the gateway did with one request.
type Outcome uint8

// Outcomes reported to an Observer.
const (
	// OutcomeForwarded: allowed and sent upstream (or answered by a respond route).
	OutcomeForwarded Outcome = iota + 1
	// OutcomeLimited: denied by an enforced limit (429).
	OutcomeLimited
	// OutcomeStoreError: the store failed and on_error decided (503 for "deny").
	OutcomeStoreError
	// OutcomeNoRoute: no route matched (404).
	OutcomeNoRoute
	// OutcomeUpstreamError: the upstream failed or timed out (502/504).
	OutcomeUpstreamError
	// OutcomeBadRequest: the request was malformed for the gateway (400).
	OutcomeBadRequest
	// OutcomeUnauthorized: a limit with on_missing = "reject" found no
	// value for one of its identity parts, or the request's API key is
	// no registered consumer's and unknown_api_key is "reject" (401).
	OutcomeUnauthorized
	// OutcomeCanceled: the client went away before its request was
	// decided (nothing counted), or while it waited for the slot a delay
	// limit reserved (the slot is given back); logged as 499.
	OutcomeCanceled
	// OutcomeShed: an adaptive_concurrency limit found the upstream at
	// capacity for the request's priority (503 with Retry-After).
	OutcomeShed
)

var outcomeNames = [...]string{
	OutcomeForwarded:     "forwarded",
	OutcomeLimited:       "limited",
	OutcomeStoreError:    "store_error",
	OutcomeNoRoute:       "no_route",
	OutcomeUpstreamError: "upstream_error",
	OutcomeBadRequest:    "bad_request",
	OutcomeUnauthorized:  "unauthorized",
	OutcomeCanceled:      "canceled",
	OutcomeShed:          "shed",
}

// String returns the outcome's metric label, e.g. "limited".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event describes one finished request for an Observer. Its slices are
// only valid during the Observe call.
type Event struct {
	// Start is when the request arrived.
	Start time.Time
	// Route is the matched route's name, "" when none matched.
	Route string
	// Method and Proto are from the request line; Path is the request
	// path in the normal form it was matched and forwarded in (escaped,
	// without the query; see policy.NormalizePath), or as received when
	// it was rejected.
	Method, Path, Proto string
	// Referer and UserAgent are the request's headers.
	Referer, UserAgent string
	// ClientKind, Client and APIKey are the resolved identity (raw: an
	// observer that records them must hash them). Empty when the route has
	// no limits.
	ClientKind, Client, APIKey string
	// IP is the resolved client IP (invalid when the route has no limits);
	// kept as an address so that observers that ignore it (metrics) cost
	// no formatting.
	IP netip.Addr
	// IPFallback is set when the selected X-Forwarded-For entry was
	// invalid and the peer address was used.
	IPFallback bool
	// Consumer is the registered consumer's name and Plan the client's
	// plan; "" for none. A consumer name is unbounded: observers must
	// not make it a metric label (the plan is bounded by the
	// configuration).
	Consumer, Plan string
	// RequestID is the request's X-Request-Id, "" when
	// server.request_id is off.
	RequestID string
	// Status is the status code sent to the client.
	Status int
	// Outcome is what the gateway did.
	Outcome Outcome
	// Hits and Decisions are the limits decided for the request (nil when
	// none were), in the same order.
	Hits      []ratelimit.Hit
	Decisions []ratelimit.Decision
	// Counted is, per hit (same order as Hits), the units the limit
	// finally counted for the request when that is known only after the
	// response: a limit that counts by response, or a reserved estimate
	// settled to the usage the upstream reported; and 0 for a delay
	// slot given back (the client left while it waited). nil when every hit
	// counted what its decision took (Hits[i].Cost when the request was
	// allowed, nothing for a peek). Observers that report usage (the
	// usage export, the access log's units) read it before the cost.
	Counted []int64
	// CountedAt is when the units of the hits counted by response
	// (Hits[i].Mode is a peek) were counted, by the store's clock when
	// it reports one: the period they belong to. Zero when Counted is
	// nil.
	CountedAt time.Time
	// StoreErr is the store's error when it failed.
	StoreErr error
	// StoreLatency is the time spent in the store call (0 for a
	// NonBlocking store, which is not timed).
	StoreLatency time.Duration
	// Delay is how long the request waited for the slots a delay limit
	// reserved before it was forwarded (0 when it did not wait).
	Delay time.Duration
	// Upstream is the time spent forwarding to the upstream (0 when the
	// request was not forwarded).
	Upstream time.Duration
	// Retries is the number of further targets the request was tried on
	// after its first attempt failed (routes with retries).
	Retries int
	// Bytes is the response body size written to the client.
	Bytes int64
	// Duration is the whole request's time in the gateway.
	Duration time.Duration
}

// Observer receives one Event per finished request. It must be safe for
// concurrent use and fast: it runs on the request path.
type Observer interface {
	Observe(*Event)
}
