package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/tollgate/gateway/upstream"
)

// errNoTarget ends an exchange whose route has no target left to try:
// every target failing its active health check, or ejected and tried.
// The error handler answers 503.
var errNoTarget = errors.New("no healthy upstream target")

// balanceKey is the context key of the request's scratch space
// (*request) on a route that hashes or retries: its hash key, and its
// event, which counts the retries.
type balanceKey struct{}

// balancedTransport is the transport of a route whose upstream is not
// Single: ReverseProxy's Rewrite runs once per request, so the choice of
// target is made here, under ReverseProxy, once per attempt. Each attempt
// picks a target that has not been tried, points a copy of the request at
// it (scheme, host and the target's base path joined to the forwarded
// path), goes through that target's transport (h2c or not), holds the
// target's in-flight count for the whole exchange (until the response
// body is closed) and tells passive health how it went. A failed attempt
// is tried again on another target when the request may be (retryable),
// the route has retries left and its budget allows.
//
// The route's timeout (timeoutTransport, which wraps this one) bounds the
// whole sequence of attempts up to the response headers, not each one:
// a client waits at most timeout, however many targets are tried.
type balancedTransport struct {
	h    *Handler
	pool *upstream.Pool
	spec *upstream.Spec
	// next is the transport of targets over HTTP/1.1 or TLS; h2c targets
	// take h.h2cTransport().
	next http.RoundTripper
}

// retryableMethod reports whether a request of method m may be sent
// again after its bytes may have reached a target: the methods RFC 9110
// defines as idempotent, but TRACE (never forwarded usefully).
func retryableMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// retryable reports whether req may be tried on another target at all:
// an idempotent method, no protocol upgrade (a tunnel is never replayed),
// no Expect: 100-continue (the client waits for the upstream's go-ahead
// before it sends its body: buffering it would answer for the upstream).
func retryable(req *http.Request) bool {
	if !retryableMethod(req.Method) || req.Header["Upgrade"] != nil {
		return false
	}
	for _, v := range req.Header["Expect"] {
		if strings.EqualFold(strings.TrimSpace(v), "100-continue") {
			return false
		}
	}
	return true
}

// RoundTrip forwards req to one target after another until one answers
// or no attempt is left.
func (b *balancedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	spec := b.spec
	var key uint64
	q, _ := req.Context().Value(balanceKey{}).(*request)
	if q != nil {
		key = q.hashKey
	}
	retries := 0
	var body []byte // the buffered body of a retryable request, nil without one
	if spec.Retries > 0 {
		b.pool.Budget().Request()
		if retryable(req) {
			retries = spec.Retries
			var err error
			var held int64
			if body, retries, held, err = b.h.bufferBody(req, spec.RetryBodyBytes, retries); err != nil {
				return nil, err
			}
			if held > 0 {
				defer b.h.retryBuffered.Add(-held)
			}
		}
	}
	var triedArr [11]*upstream.Target // retries ≤ 10: no allocation
	tried := triedArr[:0]
	t := b.pool.Pick(key, nil)
	if t == nil {
		return nil, errNoTarget
	}
	// The first attempt points req itself at its target (ReverseProxy's
	// copy, not the client's); later ones copy it, since the transport
	// may still be reading an earlier attempt's request.
	path, raw := req.URL.Path, req.URL.RawPath
	for attempt := 0; ; attempt++ {
		out := req
		if attempt > 0 {
			out = new(http.Request)
			*out = *req
			u := *req.URL
			out.URL = &u
		}
		point(out, t, path, raw, body)
		b.pool.Begin(t)
		resp, err := b.transport(t).RoundTrip(out)
		ctxDone := req.Context().Err() != nil
		// The route's timeout ending an attempt that held the whole
		// request (no body, or a buffered one) is the target's failure:
		// it had everything and did not answer. Not counting it would
		// leave a target that accepts and hangs its full share of
		// requests, each answered 504 after the whole timeout, for as
		// long as it hangs. A timeout while the client's body was still
		// streaming may be the client's doing (a slow upload), and a
		// client that went away says nothing of the target.
		timedOut := ctxDone && (body != nil || req.Body == nil || req.Body == http.NoBody) &&
			errors.Is(context.Cause(req.Context()), context.DeadlineExceeded)
		failed := err != nil && (!ctxDone || timedOut) || err == nil && gatewayFailure(resp.StatusCode)
		retry := attempt < retries && !ctxDone &&
			(err != nil || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable)
		var next *upstream.Target
		if retry {
			tried = append(tried, t)
			if next = b.pool.Pick(key, tried); next == nil || !b.pool.Budget().TryRetry() {
				next = nil
			}
		}
		if next == nil {
			if err != nil {
				if ctxDone && !timedOut {
					b.pool.Release(t)
				} else {
					b.pool.End(t, failed)
				}
				return nil, err
			}
			resp.Body = endOnClose(resp, b.pool, t, failed)
			return resp, nil
		}
		if err == nil {
			// Drained beside the next attempt, not before it: a target
			// that answers 503 and stalls its body would otherwise hold
			// the retry up until the route's timeout. The drain ends
			// with the body, or with the request (its context).
			go discard(resp.Body)
		}
		b.pool.End(t, failed)
		if q != nil {
			q.ev.Retries++
		}
		if b.h.log.Enabled(req.Context(), slog.LevelDebug) {
			reason := "error"
			if err == nil {
				reason = resp.Status
			}
			b.h.log.Debug("upstream attempt failed; retrying on another target", "route", b.pool.Route(),
				"target", t.Name, "attempt", attempt+1, "reason", reason, "error", err, "next", next.Name)
		}
		t = next
	}
}

// gatewayFailure reports whether an answer of status tells passive
// health that its target failed: 502, 503 and 504 say the target (or a
// proxy in front of it) could not serve. Other 5xx answers are the
// application's answer to that request, which a client can provoke at
// will on a path that fails (the same on every target): counting them
// would let any client eject targets, concentrating the route's load
// on the rest.
func gatewayFailure(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout
}

// maxRetryBuffered bounds the bytes of request bodies that the whole
// process holds at once so that their requests can be retried. Each
// body is bounded by its route's retry_body_bytes, but the number of
// requests is the clients' to choose: without a total, concurrent
// uploads held the clients' bytes in the heap at will (20 PUTs of 8 MiB:
// 160 MiB). A request that finds the total spent is streamed to its
// first target, intact, and not retried, as a body beyond
// retry_body_bytes is.
const maxRetryBuffered = 64 << 20

// bufferBody reads the body of a retryable request, up to limit bytes,
// so that every attempt can send it; it returns the body (nil: none, or
// too large, or no room left under maxRetryBuffered), the retries the
// request may have (none when its body is not buffered: it is then
// streamed to the first target intact, the bytes read so far, then the
// rest) and the bytes it holds of maxRetryBuffered, which the caller
// gives back when the request is done.
func (h *Handler) bufferBody(req *http.Request, limit int64, retries int) ([]byte, int, int64, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, retries, 0, nil
	}
	if req.ContentLength > limit {
		return nil, 0, 0, nil
	}
	// Room for the body: its length when known, else the most it may be.
	want := limit
	if req.ContentLength >= 0 {
		want = req.ContentLength
	}
	if h.retryBuffered.Add(want) > maxRetryBuffered {
		h.retryBuffered.Add(-want)
		return nil, 0, 0, nil
	}
	size := req.ContentLength
	if size < 0 {
		size = 512
	}
	var buf bytes.Buffer
	buf.Grow(int(min(size, limit) + 1))
	if _, err := buf.ReadFrom(io.LimitReader(req.Body, limit+1)); err != nil {
		h.retryBuffered.Add(-want)
		return nil, 0, 0, err
	}
	if int64(buf.Len()) > limit {
		h.retryBuffered.Add(-want)
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf.Bytes()), req.Body), req.Body}
		return nil, 0, 0, nil
	}
	req.Body.Close()
	b := buf.Bytes()
	if len(b) == 0 {
		b = []byte{} // read and empty: not nil, so that no attempt reads the closed body
	}
	// Hold what the body takes (a chunked one reserved the limit).
	held := int64(len(b))
	h.retryBuffered.Add(held - want)
	return b, retries, held, nil
}

// point sets out's URL to target t (its scheme, host and base path
// joined to the forwarded path and raw), and its body to a fresh reader
// of the buffered body when there is one.
func point(out *http.Request, t *upstream.Target, path, raw string, body []byte) {
	u := out.URL
	u.Scheme, u.Host = t.URL.Scheme, t.URL.Host
	u.Path, u.RawPath = joinURLPath(t.URL, path, raw)
	// The Host header names the target as configured: an address that a
	// DNS name resolved to is where the request goes, not what the
	// upstream serves (a virtual host, a Kubernetes Service name).
	out.Host = ""
	if t.Host != t.URL.Host {
		out.Host = t.Host
	}
	if body == nil {
		return
	}
	if len(body) == 0 {
		out.Body, out.GetBody = nil, nil
		return
	}
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

func (b *balancedTransport) transport(t *upstream.Target) http.RoundTripper {
	if t.H2C {
		return b.h.h2cTransport()
	}
	if t.ServerName != "" && t.URL.Scheme == "https" && t.URL.Hostname() != t.ServerName {
		return b.h.namedTransport(t.ServerName)
	}
	return b.next
}

// namedTransport returns the transport of https targets that a DNS name
// resolved to addresses: the shared transport's settings with the name as
// the TLS server name, so that the upstream's certificate is verified
// against the name (http.Transport verifies the host it dials, here an
// address) and the name is sent as SNI. One per name, kept while a route
// names it (pruneNamed): names come from the configuration, never from a
// client.
// A transport that is not an *http.Transport (a test's) is used as it is.
func (h *Handler) namedTransport(name string) http.RoundTripper {
	if v, ok := h.named.Load(name); ok {
		return v.(http.RoundTripper)
	}
	base, ok := h.transport.(*http.Transport)
	if !ok {
		return h.transport
	}
	t := base.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.ServerName = name
	v, _ := h.named.LoadOrStore(name, t)
	return v.(http.RoundTripper)
}

// pruneNamed drops the transports of the server names that no https
// target of specs (the routes now in force) has, closing their idle
// connections: names come from the configuration, but each reload may
// bring new ones (a name per deployment), and without pruning every name
// ever configured kept its transport, and its idle connections until
// they timed out, for the process's life. A request still running on the
// previous configuration makes its name's transport again, pruned at
// the next reload.
func (h *Handler) pruneNamed(specs map[string]*upstream.Spec) {
	used := make(map[string]bool)
	for _, s := range specs {
		for _, t := range s.Targets {
			if t.URL.Scheme == "https" {
				used[t.URL.Hostname()] = true
			}
		}
	}
	h.named.Range(func(k, v any) bool {
		if !used[k.(string)] {
			h.named.Delete(k)
			if tr, ok := v.(*http.Transport); ok {
				tr.CloseIdleConnections()
			}
		}
		return true
	})
}

// drainBuffers hold the buffers discard reads into: a pointer kept in
// the pool and given back as it came, so that draining allocates nothing.
var drainBuffers = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// discard reads up to 4 KiB of an answer that will not be sent on (so
// that a short error body leaves its connection reusable) and closes it.
func discard(body io.ReadCloser) {
	p := drainBuffers.Get().(*[]byte)
	for n := 0; n < len(*p); {
		k, err := body.Read((*p)[n:])
		n += k
		if err != nil {
			break
		}
	}
	drainBuffers.Put(p)
	body.Close()
}

// endOnClose returns resp's body wrapped so that closing it ends the
// exchange with t: the target counts the request in flight until then.
// An upgraded connection stays a ReadWriteCloser, as ReverseProxy needs.
func endOnClose(resp *http.Response, p *upstream.Pool, t *upstream.Target, failed bool) io.ReadCloser {
	e := ender{p: p, t: t, failed: failed}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		return &endingTunnel{ReadWriteCloser: rwc, ender: e}
	}
	return &endingBody{ReadCloser: resp.Body, ender: e}
}

type ender struct {
	p      *upstream.Pool
	t      *upstream.Target
	failed bool
	done   bool
}

func (e *ender) end() {
	if !e.done {
		e.done = true
		e.p.End(e.t, e.failed)
	}
}

type endingBody struct {
	io.ReadCloser
	ender
}

func (b *endingBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

type endingTunnel struct {
	io.ReadWriteCloser
	ender
}

func (b *endingTunnel) Close() error {
	err := b.ReadWriteCloser.Close()
	b.end()
	return err
}

// joinURLPath joins the target's base path and the request's path (path
// as decoded, raw as escaped when it differs) as ProxyRequest.SetURL
// does: a single slash between them, the escaped form kept when either
// has one. A target without a base path leaves the path as it is.
func joinURLPath(a *url.URL, bPath, bRaw string) (path, rawpath string) {
	if a.Path == "" && a.RawPath == "" {
		return bPath, bRaw
	}
	if a.RawPath == "" && bRaw == "" {
		return singleJoiningSlash(a.Path, bPath), ""
	}
	b := url.URL{Path: bPath, RawPath: bRaw}
	apath := a.EscapedPath()
	bpath := b.EscapedPath()
	aslash := strings.HasSuffix(apath, "/")
	bslash := strings.HasPrefix(bpath, "/")
	switch {
	case aslash && bslash:
		return a.Path + bPath[1:], apath + bpath[1:]
	case !aslash && !bslash:
		return a.Path + "/" + bPath, apath + "/" + bpath
	}
	return a.Path + bPath, apath + bpath
}

func singleJoiningSlash(a, b string) string {
	aslash := strings.HasSuffix(a, "/")
	bslash := strings.HasPrefix(b, "/")
	switch {
	case aslash && bslash:
		return a + b[1:]
	case !aslash && !bslash:
		return a + "/" + b
	}
	return a + b
}
