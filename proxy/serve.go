package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/upstream"
)

// allowed is the Allow header of a 405: the methods routes can take.
var allowed = []string{"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := h.now()
	snap := h.snap.Load()
	q := h.pool.Get().(*request)
	defer func() {
		q.reset()
		h.pool.Put(q)
	}()
	if h.inflight != nil {
		h.inflight.Begin()
		defer h.inflight.End()
	}
	if c := h.cand.p.Load(); c != nil {
		// Runs before q is reset, after the response is complete.
		defer h.decideCandidate(c, r, q)
		h.acquireCandidate(c, r, q) // candidate_adaptive.go
	}
	q.w = statusWriter{ResponseWriter: rw, q: q}
	w := &q.w
	ev := &q.ev
	ev.Start, ev.Method, ev.Path, ev.Proto = start, r.Method, r.URL.Path, r.Proto
	if h.tracer != nil {
		ctx, end := h.tracer.StartRequest(r.Context(), r)
		r = r.WithContext(ctx)
		defer func() { end(ev) }()
	}
	if h.observer != nil {
		ev.Referer, ev.UserAgent = firstValue(r.Header, "Referer"), firstValue(r.Header, "User-Agent")
		defer func() {
			ev.Status, ev.Bytes = w.status, w.bytes
			ev.Duration = h.now().Sub(start)
			h.observer.Observe(ev)
		}()
	}
	q.r, q.snap, q.start = r, snap, start
	if snap.p.Server.RequestID {
		q.rid = requestID(r, snap.p, &q.ids) // requestid.go
		ev.RequestID = q.rid[0]
	}
	h.serve(q)
}

// serve answers q.r once ServeHTTP has set up its request state q: the
// route, the identity and the decision, then proceed. The work is split
// so that each function's defers stay open-coded: Go compiles a defer
// into the function's own code only when (returns × defers) stays small,
// and otherwise runs it through the runtime on every request.
func (h *Handler) serve(q *request) {
	r, w, p := q.r, &q.w, q.snap.p
	ev := &q.ev
	if r.Method == http.MethodConnect {
		// A reverse proxy opens no tunnels; forwarding CONNECT would let
		// a client reach whatever the upstream can.
		ev.Outcome = OutcomeBadRequest
		w.Header()["Allow"] = allowed
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusMethodNotAllowed,
			Title:  "Method Not Allowed",
			Detail: "CONNECT is not served: the gateway is a reverse proxy, not a tunnel",
		})
		return
	}
	if v := r.Header["Via"]; v != nil && h.looped(v) {
		// Answered before any limit counts it: the loop's first hop
		// was counted already, and answers the client this 508.
		ev.Outcome = OutcomeBadRequest
		answerLoop(w)
		return
	}
	// The path as the client sent it: RawPath, or when Go found the
	// default encoding equal to it, that encoding (no allocation unless
	// the decoded path holds a byte to escape).
	raw := r.URL.RawPath
	if raw == "" {
		raw = r.URL.EscapedPath()
	}
	if r.Method == http.MethodOptions && h.preflight(q, raw) { // cors.go
		return
	}
	rt, path, err := p.Match(r.Host, r.Method, raw)
	if err != nil {
		ev.Path = raw
		ev.Outcome = OutcomeBadRequest
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusBadRequest,
			Title:  "Bad Request",
			Detail: err.Error() + ": " + headers.Sanitize(raw),
		})
		return
	}
	ev.Path = path
	if rt == nil {
		ev.Outcome = OutcomeNoRoute
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusNotFound,
			Title:  "Not Found",
			Detail: "no route matches " + headers.Sanitize(r.Method) + " " + headers.Sanitize(path),
		})
		return
	}
	ev.Route = rt.Name
	q.rt, q.raw, q.path = rt, raw, path
	if rt.CORS != nil {
		q.cors = rt.CORS
		if o := firstValue(r.Header, "Origin"); o != "" && rt.CORS.AllowsOrigin(o) {
			q.origin = o
		}
	}
	if rt.MaxBodyBytes > 0 && r.ContentLength > rt.MaxBodyBytes {
		// Refused on its Content-Length before any limit counts it or
		// any of it is read (bodylimit.go).
		ev.Outcome = OutcomeBadRequest
		tooLarge(w, r, rt.MaxBodyBytes)
		return
	}

	id := &q.id
	if len(rt.Limits) > 0 || len(rt.Adaptive) > 0 || p.Consumers.Enabled() || rt.NeedsIdentity() || hashesClient(rt) {
		*id = p.Identity.Identify(r, h.identityClock(p))
		if h.observer != nil {
			ev.ClientKind, ev.Client, ev.APIKey, ev.IP = id.ClientKind.String(), id.Client, id.APIKey, id.IP
			ev.IPFallback = id.IPFallback
			ev.Consumer, ev.Plan = id.ConsumerName(), id.Plan
		}
		if id.Rejected {
			unknownKey(w, ev, p)
			return
		}
		var ovs *override.Table
		if h.overrides != nil {
			ovs = h.overrides.For(p)
		}
		for _, l := range rt.Limits {
			if l.Tag != nil {
				// Only the gateway tags a request (limit_answer.go).
				dropClientTag(r.Header, l.Tag.Header)
			}
			if l.Exempt(id) {
				continue
			}
			var xr exprResult
			if l.Exprs != nil {
				if xr = h.limitExprs(q, l); xr.answered { // limit_expr.go
					return
				} else if xr.skip {
					continue
				}
			}
			cost, err := l.RequestCost(r.Header, r.RemoteAddr)
			if xr.cost > 0 {
				cost, err = xr.cost, nil
			}
			if err != nil {
				ev.Outcome = OutcomeBadRequest
				headers.WriteProblem(w, headers.Problem{
					Status: http.StatusBadRequest,
					Title:  "Bad Request",
					Detail: err.Error(),
				})
				return
			}
			parts, ok := l.KeyParts(id, r.Header)
			vals := keys.Values{Route: rt.Name, Method: r.Method, Header: r.Header}
			if xr.keyed {
				parts, ok = exprKeyParts(l, &xr, &vals), true
			}
			if !ok {
				ev.Outcome = OutcomeUnauthorized
				headers.WriteProblem(w, headers.Problem{
					Status: http.StatusUnauthorized,
					Title:  "Unauthorized",
					Detail: "limit " + strconv.Quote(l.Name) + " needs " + keys.MissingNames(l.By),
				})
				return
			}
			value, ok := l.DistinctValue(p.Identity, id, &vals, q.path, xr.distinct)
			if !ok {
				ev.Outcome = OutcomeUnauthorized
				headers.WriteProblem(w, headers.Problem{
					Status: http.StatusUnauthorized,
					Title:  "Unauthorized",
					Detail: "limit " + strconv.Quote(l.Name) + " needs " + keys.MissingNames([]keys.Part{l.Distinct.Part}),
				})
				return
			}
			// A key repeated from one request to the next is remembered
			// by the extractor: neither hashed nor allocated again.
			key := p.Identity.Key(parts, id, &vals)
			base := l.For(id)
			lim := h.limitFor(ovs, p, l, base, parts, key, id)
			q.varied = q.varied || lim != base
			if l.EnforcePercent < 100 && !l.Enforces(key) {
				lim = l.ShadowOf(lim) // limit_rollout.go
			}
			reqCost := cost
			if l.Response != nil && l.Response.Usage.Reserves() {
				// A token budget reserves its estimate (usage.go).
				if cost, ok = h.estimate(q, l, lim, cost); !ok {
					return
				}
			}
			q.hits = append(q.hits, ratelimit.Hit{Limit: lim, Key: key, Cost: cost, Value: value})
			q.peekResponse(l, reqCost)
			h.noWaitIfFull(q, l)
		}
	}

	if len(rt.Adaptive) > 0 {
		h.serveAdaptive(q) // adaptive.go: admitted first, then as below
		return
	}
	if len(q.hits) > 0 {
		if r.Context().Err() != nil {
			// The client went away before its decision: an HTTP/2 stream
			// reset while it queued behind the stream limit, a dropped
			// connection. Nothing will be forwarded, so nothing is
			// counted, and a store call (a Redis round trip) is spared.
			ev.Outcome = OutcomeCanceled
			w.WriteHeader(499)
			return
		}
		if !h.decide(q) {
			return
		}
	}
	h.proceed(q)
}

// proceed runs what follows an allowed decision (or a request no limit
// applies to): the response-counting and concurrency bookkeeping, a
// delay, and the answer of a respond route or the upstream's.
func (h *Handler) proceed(q *request) {
	r, w, snap, rt := q.r, &q.w, q.snap, q.rt
	p := snap.p
	ev := &q.ev
	id := &q.id
	if len(q.resp.idx) > 0 && len(q.hits) > 0 {
		// Counted once the response is known (respcount.go).
		defer h.countResponse(q, p)
		r = detachForResponse(r, q)
	}

	if hasConcurrency(q.hits) {
		// Release exactly once, whatever happens below: upstream failure,
		// client disconnect or a panic unwinding through here.
		defer h.release(q)
	}

	if d := delayOf(q); d > 0 && !h.wait(w, r, p, rt, q, d) {
		return
	}

	ev.Outcome = OutcomeForwarded
	if rt.Respond != nil {
		q.respondStatus(rt.Respond.Status)
		if rt.Respond.Quota != nil {
			h.quota(w, r, snap, rt, q, q.start)
			return
		}
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
		q.body = &bodyReader{ReadCloser: r.Body, rw: w.ResponseWriter, limit: rt.MaxBodyBytes, clock: q.ad.now}
		r.Body = q.body
		if rt.Timeout > 0 {
			// ReverseProxy hides the body from the transport behind a
			// wrapper of its own; the route's transport finds it here to
			// cut off an upload still arriving when the timeout runs out.
			r = r.WithContext(context.WithValue(r.Context(), uploadKey{}, q.body))
		}
	}
	if q.rid != nil && r.Header != nil {
		// The upstream's copy (messages.rewrite) and {request_id} read
		// it here; set only now, so that an answer the gateway writes
		// itself pays no header write for it.
		r.Header[requestIDHeader] = q.rid
	}
	if forwardsConsumer(&p.Consumers, id) || rt.NeedsIdentity() {
		// The route's Rewrite finds the identity here to name the
		// consumer and plan to the upstream, and the header rules to
		// name the client.
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
	}
	if s := rt.Upstreams; s != nil && !s.Single() && (s.Balance == upstream.Hash || s.Retries > 0) {
		// The route's transport finds the request's hash key here, and
		// counts its retries in its event.
		q.hashKey = hashKey(r, s, id)
		r = r.WithContext(context.WithValue(r.Context(), balanceKey{}, q))
	}
	if esc, plain := rt.ForwardPath(q.path); esc != q.raw {
		// The upstream receives the path the route was matched on. A
		// handler must not change its request: change a shallow copy.
		u := *r.URL
		u.Path, u.RawPath = plain, esc
		r = r.WithContext(r.Context())
		r.URL = &u
	}
	h.forward(rp, w, r, ev)
}

// identityClock is the instant to resolve an identity at. The wall clock
// is read only when a bearer token's exp and nbf need it: a clock read is
// a measurable share of a 429's cost.
func (h *Handler) identityClock(p *policy.Policy) time.Time {
	if p.Identity.VerifiesTokens() {
		return h.wallNow()
	}
	return time.Time{}
}

// forward runs the upstream exchange and records its time. ReverseProxy
// aborts a response whose body it cannot finish (the upstream cut it or
// fell silent past idle_timeout, or the client went away) by panicking
// with http.ErrAbortHandler, which net/http turns into a cut connection:
// the event then says upstream_error unless the client left first. The
// panic is not recovered, so it keeps its stack and its meaning.
func (h *Handler) forward(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request, ev *Event) {
	start := h.now()
	finished := false
	defer func() {
		ev.Upstream = h.now().Sub(start)
		if !finished && r.Context().Err() == nil {
			ev.Outcome = OutcomeUpstreamError
		}
	}()
	rp.ServeHTTP(w, r)
	finished = true
}

// decide runs the store call for q.hits at the request's start and writes
// the rate-limit headers. It returns true when the request may go on,
// false when a response (429, 503) has been written.
func (h *Handler) decide(q *request) bool {
	r, w, snap, rt, now := q.r, &q.w, q.snap, q.rt, q.start
	p := snap.p
	ev := &q.ev
	q.ds = grow(q.ds, len(q.hits))
	// A store that cannot block (the memory store) needs no deadline: the
	// timer would cost more than the decision. Nor does one that bounds
	// its calls by a budget no longer than the policy's (the Redis store).
	ctx, cancel := r.Context(), context.CancelFunc(nil)
	if !h.nonBlocking && (h.selfTimed <= 0 || h.selfTimed > p.Store.Timeout) {
		ctx, cancel = context.WithTimeout(ctx, p.Store.Timeout)
	}
	var endSpan func(error)
	if h.tracer != nil {
		ctx, endSpan = h.tracer.StartStore(ctx, len(q.hits))
	}
	allowed, err := h.store.Decide(ctx, now, q.hits, q.ds)
	q.decider = h.store
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
			q.decider = h.local
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
	if !allowed && p.DenyExtras {
		jitter(p, q.hits, q.ds, now) // limit_answer.go
	}
	pol := rt.RateLimitPolicyAt(&q.id, now)
	if q.varied {
		pol = variedPolicy(q.hits, now)
	}
	h.answers.Set(w.Header(), p.Headers, pol, q.hits, q.ds, now)
	h.logShadow(snap, q.hits, q.ds, now)
	if allowed {
		if p.Tags {
			tagShadowed(p, r, q.hits, q.ds) // limit_answer.go
		}
		return true
	}
	ev.Outcome = OutcomeLimited
	if p.DenyExtras && !isGRPC(r) && h.limitAnswer(q) { // limit_answer.go
		return false
	}
	if isGRPC(r) {
		pb := headers.TooManyRequests(q.hits, q.ds)
		if pb.RetryAfter > 0 {
			w.Header()["Retry-After"] = h.answers.IntValue(pb.RetryAfter)
		}
		writeGRPCLimited(w, pb, q.hits, q.ds)
		return false
	}
	// The same Retry-After and problem body, built without strings.
	h.answers.WriteTooManyRequests(w, q.hits, q.ds)
	return false
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

// hashesClient reports whether rt balances by a hash of the client's
// identity, which must then be resolved even when no limit needs it.
func hashesClient(rt *policy.Route) bool {
	s := rt.Upstreams
	return s != nil && s.Balance == upstream.Hash && s.HashHeader == "" && !s.Single()
}

// hashKey returns the request's hash key on a route balanced by hash:
// the hash of the hash_on header's first value, or of the client's
// identity (as limits key it: API key, user or IP). A request without one
// (the header absent or empty) has none (0) and is balanced by round
// robin: it has nothing to stick by.
func hashKey(r *http.Request, s *upstream.Spec, id *keys.Identity) uint64 {
	if s.Balance != upstream.Hash {
		return 0
	}
	v := id.Client
	if s.HashHeader != "" {
		v = firstValue(r.Header, s.HashHeader)
	}
	if v == "" {
		return 0
	}
	return upstream.HashKey(v)
}
