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
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
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
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// Transport carries upstream requests; nil uses NewTransport().
	Transport http.RoundTripper
	// Observer is told the outcome of every request; nil observes nothing.
	// If it also implements InFlight, it is told when requests start and
	// finish.
	Observer Observer
	// Tracer starts spans; nil traces nothing at no cost.
	Tracer Tracer
}

// NonBlocking is implemented by stores whose calls never wait on I/O or
// on another request (the in-memory store): the handler then decides
// without a deadline, saving a timer per request.
type NonBlocking interface {
	NonBlocking() bool
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
	// Start starts the server span; the returned func ends it.
	Start(ctx context.Context, r *http.Request) (context.Context, func(*Event))
	// Store starts the store call's span; the returned func ends it.
	Store(ctx context.Context, hits int) (context.Context, func(error))
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
)

var outcomeNames = [...]string{
	OutcomeForwarded:     "forwarded",
	OutcomeLimited:       "limited",
	OutcomeStoreError:    "store_error",
	OutcomeNoRoute:       "no_route",
	OutcomeUpstreamError: "upstream_error",
	OutcomeBadRequest:    "bad_request",
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
	// Method, Path and Proto are from the request line (Path without the
	// query).
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
	// Status is the status code sent to the client.
	Status int
	// Outcome is what the gateway did.
	Outcome Outcome
	// Hits and Decisions are the limits decided for the request (nil when
	// none were), in the same order.
	Hits      []ratelimit.Hit
	Decisions []ratelimit.Decision
	// StoreErr is the store's error when it failed.
	StoreErr error
	// StoreLatency is the time spent in the store call (0 for a
	// NonBlocking store, which is not timed).
	StoreLatency time.Duration
	// Upstream is the time spent forwarding to the upstream (0 when the
	// request was not forwarded).
	Upstream time.Duration
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

// Handler is the gateway's public http.Handler. It is safe for concurrent
// use; Swap replaces its policy atomically.
type Handler struct {
	store     ratelimit.Store
	local     ratelimit.Store
	log       *slog.Logger
	now       func() time.Time
	transport http.RoundTripper
	observer  Observer
	inflight  InFlight
	tracer    Tracer
	// nonBlocking is set when the store promises never to block.
	nonBlocking bool
	// storeErrLog rate-limits the log lines about store failures.
	storeErrLog shadowLog
	snap        atomic.Pointer[snapshot]
	pool        sync.Pool // *request
	buffers     bufferPool
}

// snapshot is one compiled policy with its reverse proxies.
type snapshot struct {
	p       *policy.Policy
	proxies map[*policy.Route]*httputil.ReverseProxy
	shadow  map[*ratelimit.Limit]*shadowLog
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
		transport: opts.Transport,
		observer:  opts.Observer,
		tracer:    opts.Tracer,
	}
	h.inflight, _ = opts.Observer.(InFlight)
	if nb, ok := opts.Store.(NonBlocking); ok && nb.NonBlocking() {
		h.nonBlocking = true
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.transport == nil {
		h.transport = NewTransport()
	}
	h.pool.New = func() any { return new(request) }
	if err := h.Swap(p); err != nil {
		return nil, err
	}
	return h, nil
}

// NewTransport returns the upstream transport: HTTP/1.1 keep-alive with a
// generous idle pool per upstream host, bounded dial and TLS handshakes.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
	}
}

// Swap makes p the active policy. Requests already in flight finish on the
// policy they started with.
func (h *Handler) Swap(p *policy.Policy) error {
	if p == nil {
		return errors.New("proxy: nil policy")
	}
	s := &snapshot{p: p, proxies: make(map[*policy.Route]*httputil.ReverseProxy, len(p.Routes)),
		shadow: make(map[*ratelimit.Limit]*shadowLog)}
	for _, l := range p.Limits {
		if l.Shadow {
			s.shadow[l.Limit] = new(shadowLog)
		}
	}
	for _, rt := range p.Routes {
		if rt.Respond == nil && rt.Upstream != nil {
			s.proxies[rt] = h.reverseProxy(rt, p)
		}
	}
	h.snap.Store(s)
	return nil
}

// Policy returns the active policy.
func (h *Handler) Policy() *policy.Policy { return h.snap.Load().p }

// request is the per-request scratch space, pooled.
type request struct {
	hits []ratelimit.Hit
	ds   []ratelimit.Decision
	key  []byte
	ev   Event
	// body wraps the client's request body, if there is one.
	body *bodyReader
	// w wraps the client's ResponseWriter; the ReverseProxy error handler
	// finds the request through it.
	w statusWriter
}

// bodyReader records the first error reading the client's body, so that a
// malformed body is answered 400, not blamed on the upstream. It is written
// by the transport's body-copying goroutine, which may outlive the request;
// so it is allocated per request, never pooled.
type bodyReader struct {
	io.ReadCloser
	err atomic.Pointer[error]
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

func (q *request) reset() {
	clear(q.hits)
	q.hits = q.hits[:0]
	q.ds = q.ds[:0]
	q.key = q.key[:0]
	q.ev = Event{}
	q.body = nil
	q.w = statusWriter{}
}

// statusWriter records the status code and body size sent.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	q      *request
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// WriteString writes s without converting it to a []byte when the
// underlying writer can take strings (net/http's can).
func (w *statusWriter) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := io.WriteString(w.ResponseWriter, s)
	w.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher for streaming responses.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := h.now()
	snap := h.snap.Load()
	p := snap.p
	q := h.pool.Get().(*request)
	defer func() {
		q.reset()
		h.pool.Put(q)
	}()
	if h.inflight != nil {
		h.inflight.Begin()
		defer h.inflight.End()
	}
	q.w = statusWriter{ResponseWriter: rw, q: q}
	w := &q.w
	ev := &q.ev
	ev.Start, ev.Method, ev.Path, ev.Proto = start, r.Method, r.URL.Path, r.Proto
	if h.tracer != nil {
		ctx, end := h.tracer.Start(r.Context(), r)
		r = r.WithContext(ctx)
		defer func() { end(ev) }()
	}
	if h.observer != nil {
		ev.Referer, ev.UserAgent = r.Header.Get("Referer"), r.Header.Get("User-Agent")
		defer func() {
			ev.Status, ev.Bytes = w.status, w.bytes
			ev.Duration = h.now().Sub(start)
			h.observer.Observe(ev)
		}()
	}

	rt := p.Match(r.Host, r.Method, r.URL.Path)
	if rt == nil {
		ev.Outcome = OutcomeNoRoute
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusNotFound,
			Title:  "Not Found",
			Detail: "no route matches " + r.Method + " " + sanitize(r.URL.Path),
		})
		return
	}
	ev.Route = rt.Name

	if len(rt.Limits) > 0 {
		id := p.Identity.Identify(r, start)
		if h.observer != nil {
			ev.ClientKind, ev.Client, ev.APIKey, ev.IP = id.ClientKind.String(), id.Client, id.APIKey, id.IP
			ev.IPFallback = id.IPFallback
		}
		for _, l := range rt.Limits {
			if l.Exempt(id.IP, id.APIKey) {
				continue
			}
			cost, err := requestCost(l, r)
			if err != nil {
				ev.Outcome = OutcomeBadRequest
				headers.WriteProblem(w, headers.Problem{
					Status: http.StatusBadRequest,
					Title:  "Bad Request",
					Detail: err.Error(),
				})
				return
			}
			parts := l.By
			if l.OnMissing != policy.OnMissingShared && missingPart(parts, &id, r) {
				if l.OnMissing == policy.OnMissingReject {
					ev.Outcome = OutcomeBadRequest
					headers.WriteProblem(w, headers.Problem{
						Status: http.StatusUnauthorized,
						Title:  "Unauthorized",
						Detail: "limit " + strconv.Quote(l.Name) + " needs " + missingNames(parts),
					})
					return
				}
				parts = l.ByIP
			}
			n := len(q.key)
			q.key = keys.AppendKey(q.key, parts, &id, r, rt.Name)
			q.hits = append(q.hits, ratelimit.Hit{Limit: l.Limit, Key: string(q.key[n:]), Cost: cost})
		}
	}

	if len(q.hits) > 0 {
		if !h.decide(w, r, snap, rt, q, start) {
			return
		}
	}

	if hasConcurrency(q.hits) {
		// Release exactly once, whatever happens below: upstream failure,
		// client disconnect or a panic unwinding through here.
		defer h.release(q.hits)
	}

	ev.Outcome = OutcomeForwarded
	if rt.Respond != nil {
		respond(w, rt.Respond)
		return
	}
	rp := snap.proxies[rt]
	if rp == nil {
		ev.Outcome = OutcomeUpstreamError
		headers.WriteProblem(w, headers.Problem{Status: http.StatusBadGateway, Title: "Bad Gateway",
			Detail: "route " + strconv.Quote(rt.Name) + " has no upstream"})
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		q.body = &bodyReader{ReadCloser: r.Body}
		r.Body = q.body
	}
	ctx := r.Context()
	if rt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rt.Timeout)
		defer cancel()
	}
	upStart := h.now()
	rp.ServeHTTP(w, r.WithContext(ctx))
	ev.Upstream = h.now().Sub(upStart)
}

// decide runs the store call for q.hits and writes the rate-limit headers.
// It returns true when the request may go on, false when a response (429,
// 503) has been written.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, snap *snapshot, rt *policy.Route, q *request, now time.Time) bool {
	p := snap.p
	ev := &q.ev
	q.ds = grow(q.ds, len(q.hits))
	// A store that cannot block (the memory store) needs no deadline: the
	// timer would cost more than the decision.
	ctx, cancel := r.Context(), context.CancelFunc(nil)
	if !h.nonBlocking {
		ctx, cancel = context.WithTimeout(ctx, p.Store.Timeout)
	}
	var endSpan func(error)
	if h.tracer != nil {
		ctx, endSpan = h.tracer.Store(ctx, len(q.hits))
	}
	allowed, err := h.store.Decide(ctx, now, q.hits, q.ds)
	if cancel != nil {
		cancel()
	}
	if endSpan != nil {
		endSpan(err)
	}
	if !h.nonBlocking {
		// A non-blocking store's latency is the handler's own CPU time;
		// timing it would cost a clock read and a histogram record per
		// request for a figure that says nothing about the store.
		ev.StoreLatency = h.now().Sub(now)
	}
	if err != nil {
		ev.StoreErr = err
		h.logStoreError(err, p.Store.OnError, now)
		switch {
		case p.Store.OnError == policy.OnErrorLocal && h.local != nil && h.local != h.store:
			allowed, err = h.local.Decide(r.Context(), now, q.hits, q.ds)
		case p.Store.OnError == policy.OnErrorDeny:
			ev.Outcome = OutcomeStoreError
			w.Header()["Retry-After"] = headers.IntValue(1)
			headers.WriteProblem(w, headers.Problem{
				Status:     http.StatusServiceUnavailable,
				Title:      "Service Unavailable",
				Detail:     "rate-limit store unavailable; retry in 1s",
				RetryAfter: 1,
			})
			return false
		}
		if err != nil {
			// on_error = "allow", or the local fallback failed too:
			// forward without rate-limit headers.
			q.hits = q.hits[:0]
			return true
		}
	}
	ev.Hits, ev.Decisions = q.hits, q.ds
	headers.Set(w.Header(), p.Headers, rt.RateLimitPolicy, q.hits, q.ds, now)
	h.logShadow(snap, q.hits, q.ds, now)
	if allowed {
		return true
	}
	ev.Outcome = OutcomeLimited
	pb := headers.TooManyRequests(q.hits, q.ds)
	if pb.RetryAfter > 0 {
		w.Header()["Retry-After"] = headers.IntValue(pb.RetryAfter)
	}
	headers.WriteProblem(w, pb)
	return false
}

// shadowLogEvery is the least time between two log lines about one shadow
// limit.
const shadowLogEvery = time.Second

// shadowLog rate-limits the log lines of one shadow limit.
type shadowLog struct {
	last       atomic.Int64 // unix nanoseconds of the last line
	suppressed atomic.Int64 // denials not logged since
}

// logShadow logs what shadow limits would have denied: at most one line a
// second per limit at info, counting the denials in between (the access
// log, outcome shadow_limited, and the tollgate.decisions metric,
// mode="shadow", record every one). A line per request would flood the log
// under exactly the load a shadow limit is tried on.
func (h *Handler) logShadow(snap *snapshot, hits []ratelimit.Hit, ds []ratelimit.Decision, now time.Time) {
	for i := range hits {
		if !hits[i].Limit.Shadow || ds[i].Allowed {
			continue
		}
		sl := snap.shadow[hits[i].Limit]
		if sl == nil {
			continue
		}
		last := sl.last.Load()
		if now.UnixNano()-last < int64(shadowLogEvery) || !sl.last.CompareAndSwap(last, now.UnixNano()) {
			sl.suppressed.Add(1)
			continue
		}
		h.log.Info("shadow limit would deny", "limit", hits[i].Limit.Name,
			"retry_after", ds[i].RetryAfter.String(), "also_denied_since_last_line", sl.suppressed.Swap(0))
	}
}

// logStoreError logs a store failure at most once a second, with the
// number of failures since the last line: an outage must show in the log
// without a line per request.
func (h *Handler) logStoreError(err error, onError policy.OnError, now time.Time) {
	last := h.storeErrLog.last.Load()
	if now.UnixNano()-last < int64(time.Second) || !h.storeErrLog.last.CompareAndSwap(last, now.UnixNano()) {
		h.storeErrLog.suppressed.Add(1)
		return
	}
	h.log.Warn("rate-limit store failed; store.on_error decides", "on_error", onError.String(), "err", err,
		"also_failed_since_last_line", h.storeErrLog.suppressed.Swap(0))
}

// release gives back the concurrency slots of an allowed request. It uses
// a fresh context: the request's own may already be cancelled.
func (h *Handler) release(hits []ratelimit.Hit) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.store.Release(ctx, hits); err != nil {
		h.log.Warn("releasing concurrency slots failed", "err", err)
		if h.local != nil && h.local != h.store {
			_ = h.local.Release(ctx, hits)
		}
	}
}

// missingPart reports whether the request lacks a value for one of the
// identity parts (api_key, user, header:<Name>) of a limit's key.
func missingPart(parts []keys.Part, id *keys.Identity, r *http.Request) bool {
	for _, p := range parts {
		switch p.Kind {
		case keys.PartAPIKey:
			if id.APIKey == "" {
				return true
			}
		case keys.PartUser:
			if id.User == "" {
				return true
			}
		case keys.PartHeader:
			if r.Header.Get(p.Header) == "" {
				return true
			}
		}
	}
	return false
}

// missingNames lists the identity parts of a key for a 401 body.
func missingNames(parts []keys.Part) string {
	var names []string
	for _, p := range parts {
		switch p.Kind {
		case keys.PartAPIKey:
			names = append(names, "an API key")
		case keys.PartUser:
			names = append(names, "an authenticated user")
		case keys.PartHeader:
			names = append(names, "header "+p.Header)
		}
	}
	return strings.Join(names, " and ")
}

func hasConcurrency(hits []ratelimit.Hit) bool {
	for i := range hits {
		if hits[i].Limit.Algorithm == ratelimit.Concurrency {
			return true
		}
	}
	return false
}

// maxCostHeaderLen bounds the cost header value we parse.
const maxCostHeaderLen = 20

// requestCost returns the request's cost for l: the static cost, or the
// value of l's cost header when it is present.
func requestCost(l *policy.Limit, r *http.Request) (int64, error) {
	if l.CostHeader == "" {
		return l.Cost, nil
	}
	v := r.Header.Get(l.CostHeader)
	if v == "" {
		return l.Cost, nil
	}
	if len(v) > maxCostHeaderLen {
		return 0, errors.New("header " + l.CostHeader + " is not a positive integer")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > ratelimit.MaxLimit {
		return 0, errors.New("header " + l.CostHeader + " must be an integer in 1.." + strconv.FormatInt(ratelimit.MaxLimit, 10) + ", got " + strconv.Quote(v))
	}
	return n, nil
}

func grow(ds []ratelimit.Decision, n int) []ratelimit.Decision {
	if cap(ds) < n {
		return make([]ratelimit.Decision, n)
	}
	ds = ds[:n]
	clear(ds)
	return ds
}

func respond(w http.ResponseWriter, rs *policy.Respond) {
	// The values are built once per route at compile time; net/http only
	// reads them.
	h := w.Header()
	h["Content-Type"] = rs.ContentTypeHeader
	h["Content-Length"] = rs.ContentLengthHeader
	w.WriteHeader(rs.Status)
	_, _ = io.WriteString(w, rs.Body)
}

// sanitize bounds a client-supplied path before it is echoed in a body.
func sanitize(s string) string {
	const max = 256
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
