// Package proxy is Tollgate's request path: an http.Handler that matches a
// route, resolves the client's identity, decides every applicable limit at
// once, and then either forwards the request upstream with
// httputil.ReverseProxy or answers 429 with Retry-After, rate-limit headers
// and an RFC 9457 problem body.
//
// The active policy is swapped atomically on reload: a request runs from
// start to end on the snapshot it started with.
package proxy

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/upstream"
)

// Options configures a Handler. Store is required; the rest have defaults.
type Options struct {
	// Store decides limits. Required.
	Store ratelimit.Store
	// Local decides limits on this node alone when Store fails and the
	// policy's store.on_error is "local". Nil falls back to "allow".
	Local ratelimit.Store
	// Logger receives structured logs; nil uses slog.Default().
	Logger *slog.Logger
	// Now is the clock of rate-limit decisions; nil uses time.Now. The
	// gateway passes a monotonic clock anchored at startup, so that a
	// stepped wall clock neither refills nor freezes a limit.
	Now func() time.Time
	// WallNow is the clock against which a token's exp and nbf are checked;
	// nil uses time.Now. They are wall-clock instants: judged on Now, a
	// gateway whose wall clock was corrected after a long uptime (or that
	// started with a wrong one) would accept tokens that have expired.
	WallNow func() time.Time
	// Transport carries upstream requests; nil uses NewTransport().
	Transport http.RoundTripper
	// Observer is told the outcome of every request; nil observes nothing.
	// If it also implements InFlight, it is told when requests start and
	// finish.
	Observer Observer
	// Tracer starts spans; nil traces nothing at no cost.
	Tracer Tracer
	// Overrides are the overrides of limits' numbers in force; nil has
	// none.
	Overrides OverrideSource
	// Upstreams keeps the routes' targets (health, balancing state)
	// across policy swaps and runs their health checks and DNS
	// resolution; nil gives the Handler a registry of its own that probes
	// and resolves nothing (replay and test, whose transport is a stub).
	Upstreams *upstream.Registry
	// ClientLabel names a client identity (its kind and raw value) as the
	// access log shows it, for the {client} of header rules; it must
	// never return an API key raw. Nil names every client by its kind
	// alone ("api_key", "ip").
	ClientLabel func(kind, value string) string
}

// OverrideSource gives the override table compiled against a policy (nil:
// none).
type OverrideSource interface {
	For(p *policy.Policy) *override.Table
}

// Handler is the gateway's public http.Handler. It is safe for concurrent
// use; Swap replaces its policy atomically.
type Handler struct {
	store     ratelimit.Store
	local     ratelimit.Store
	log       *slog.Logger
	now       func() time.Time
	wallNow   func() time.Time
	transport http.RoundTripper
	// h2c carries h2c:// routes; made on first use.
	h2c       http.RoundTripper
	h2cOnce   sync.Once
	observer  Observer
	inflight  InFlight
	tracer    Tracer
	overrides OverrideSource
	upstreams *upstream.Registry
	// named holds the transports of https targets resolved from a DNS
	// name, by name (namedTransport).
	named sync.Map
	// retryBuffered counts the bytes of request bodies held so that
	// their requests can be retried, at most maxRetryBuffered (retry.go).
	retryBuffered atomic.Int64
	// via is the Via entry every forwarded request carries, and
	// viaPseudonym the part of it naming this process (loop.go).
	via          []string
	viaPseudonym string
	// clientLabel is Options.ClientLabel, never nil.
	clientLabel func(kind, value string) string
	// nonBlocking is set when the store promises never to block.
	nonBlocking bool
	// selfTimed is the budget a SelfTimed store bounds its calls by; 0
	// when the store does not.
	selfTimed time.Duration
	// storeErrLog rate-limits the log lines about store failures.
	storeErrLog logThrottle
	// upstreamErrLog throttles the lines about failed upstream exchanges.
	upstreamErrLog logThrottle
	snap           atomic.Pointer[snapshot]
	pool           sync.Pool // *request
	// waiting counts the requests waiting for delay slots, per limit.
	waiting rooms
	// adaptive keeps the adaptive limits' limiters across swaps.
	adaptive adaptiveLimiters
	// cand is the configuration decided beside the live one, if any.
	cand    candidateSlot
	buffers bufferPool
	// answers writes the rate-limit headers and 429s, keeping the last
	// denial's values for a client that keeps asking.
	answers headers.Writer
}

// snapshot is one compiled policy with its reverse proxies.
type snapshot struct {
	p       *policy.Policy
	proxies map[*policy.Route]*httputil.ReverseProxy
	shadow  map[*ratelimit.Limit]*logThrottle
	// pools are the targets of the routes that forward.
	pools map[*policy.Route]*upstream.Pool
	// adaptive are the limiters of each route's adaptive limits, in the
	// order of Route.Adaptive (adaptive.go).
	adaptive map[*policy.Route][]*adaptive.Limiter
}

// New returns a Handler serving p.
func New(p *policy.Policy, opts Options) (*Handler, error) {
	if opts.Store == nil {
		return nil, errors.New("proxy: a store is required")
	}
	h := &Handler{
		store:     opts.Store,
		local:     opts.Local,
		log:       opts.Logger,
		now:       opts.Now,
		wallNow:   opts.WallNow,
		transport: opts.Transport,
		observer:  opts.Observer,
		tracer:    opts.Tracer,
		overrides: opts.Overrides,
		upstreams: opts.Upstreams,

		clientLabel: opts.ClientLabel,
	}
	if h.upstreams == nil {
		h.upstreams = upstream.NewRegistry(upstream.Options{Logger: opts.Logger, Inert: true})
	}
	if h.clientLabel == nil {
		h.clientLabel = func(kind, _ string) string { return kind }
	}
	h.inflight, _ = opts.Observer.(InFlight)
	if nb, ok := opts.Store.(NonBlocking); ok && nb.NonBlocking() {
		h.nonBlocking = true
	}
	if st, ok := opts.Store.(SelfTimed); ok {
		h.selfTimed = st.CallTimeout()
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.wallNow == nil {
		h.wallNow = time.Now
	}
	if h.transport == nil {
		h.transport = NewTransport()
	}
	h.pool.New = func() any { return new(request) }
	h.via, h.viaPseudonym = newVia()
	if err := h.Swap(p); err != nil {
		return nil, err
	}
	return h, nil
}

// NewTransport returns the upstream transport: HTTP/1.1 keep-alive with a
// generous idle pool per upstream host, bounded dial and TLS handshakes;
// an https:// upstream that offers HTTP/2 by ALPN gets HTTP/2 (what a gRPC
// service needs), an upgrade (WebSocket) request always HTTP/1.1.
func NewTransport() *http.Transport {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return &http.Transport{
		Protocols: &p,
		Proxy:     nil,
		// A name is refused the addresses no upstream is at (0.0.0.0,
		// the metadata service's), as a Pool's lookups are.
		DialContext: upstream.GuardedDial(&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}),
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// NewH2CTransport returns the transport of h2c:// upstreams: cleartext
// HTTP/2 with prior knowledge, one multiplexed connection per upstream
// (more when its stream limit is reached), bounded dial.
func NewH2CTransport() *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{
		Protocols: &p,
		// A name is refused the addresses no upstream is at (0.0.0.0,
		// the metadata service's), as a Pool's lookups are.
		DialContext: upstream.GuardedDial(&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}),
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		HTTP2: &http.HTTP2Config{
			// A gRPC stream may stay quiet for long: a PING tells a dead
			// upstream from a silent one.
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
}

// Swap makes p the active policy. Requests already in flight finish on the
// policy they started with.
func (h *Handler) Swap(p *policy.Policy) error {
	if p == nil {
		return errors.New("proxy: nil policy")
	}
	s := &snapshot{p: p, proxies: make(map[*policy.Route]*httputil.ReverseProxy, len(p.Routes)),
		shadow: make(map[*ratelimit.Limit]*logThrottle)}
	for _, l := range p.Limits {
		if l.Shadow {
			t := new(logThrottle) // one per limit, whichever variant denied
			for _, v := range l.Variants() {
				s.shadow[v] = t
			}
		}
	}
	specs := make(map[string]*upstream.Spec, len(p.Routes))
	for _, rt := range p.Routes {
		if rt.Respond == nil && rt.Upstreams != nil {
			specs[rt.Name] = rt.Upstreams
		}
	}
	s.adaptive = h.adaptive.update(p, h.now())
	pools := h.upstreams.Update(specs)
	h.pruneNamed(specs)
	s.pools = make(map[*policy.Route]*upstream.Pool, len(pools))
	for _, rt := range p.Routes {
		if rt.Respond == nil && rt.Upstream != nil {
			s.pools[rt] = pools[rt.Name]
			s.proxies[rt] = h.reverseProxy(rt, p, s.pools[rt])
		}
	}
	h.snap.Store(s)
	return nil
}

// Policy returns the active policy.
func (h *Handler) Policy() *policy.Policy { return h.snap.Load().p }
