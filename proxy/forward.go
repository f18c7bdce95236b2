package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/policy"
)

// gatewayOwned lists request headers only the gateway may set: client-sent
// copies never reach the upstream. (ReverseProxy already drops Forwarded and
// X-Forwarded-* when Rewrite is used, and every hop-by-hop header, including
// those named in Connection.)
var gatewayOwned = []string{"X-Real-Ip", "X-Gateway-User", "X-Consumer-Id", "X-Client-Ip"}

// reverseProxy builds the ReverseProxy of one route.
func (h *Handler) reverseProxy(rt *policy.Route, p *policy.Policy) *httputil.ReverseProxy {
	target := rt.Upstream
	prefix := rt.PathPrefix
	strip := rt.StripPrefix && prefix != "/"
	identity := p.Identity
	userHeader := identity.UserHeader()
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			peerTrusted := identity.PeerTrusted(pr.In)
			if peerTrusted {
				// Keep the chain our trusted proxies built; SetXForwarded
				// appends the peer to it.
				if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 {
					pr.Out.Header["X-Forwarded-For"] = append([]string(nil), xff...)
				}
			}
			for _, name := range gatewayOwned {
				pr.Out.Header.Del(name)
			}
			if userHeader != "" && !peerTrusted {
				pr.Out.Header.Del(userHeader)
			}
			if strip {
				pr.Out.URL.Path = stripPrefix(pr.Out.URL.Path, prefix)
				pr.Out.URL.RawPath = ""
			}
			pr.SetURL(target)
			pr.SetXForwarded()
			if h.tracer != nil {
				h.tracer.Inject(pr.In.Context(), pr.Out.Header)
			}
		},
		Transport:    routeTransport(h.transport, rt),
		BufferPool:   &h.buffers,
		ErrorHandler: h.upstreamError,
		ErrorLog:     slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// stripPrefix removes the route's prefix from path, leaving at least "/".
func stripPrefix(path, prefix string) string {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		// The router matched a respelling ("//v1/x", "/v1/./x"): strip
		// from the cleaned form instead.
		rest, ok = strings.CutPrefix(policy.CleanPath(path), prefix)
		if !ok {
			return path
		}
	}
	if rest == "" || rest[0] != '/' {
		rest = "/" + rest
	}
	return rest
}

// upstreamError answers a failed upstream exchange: 504 when the route's
// timeout expired, 502 otherwise, nothing when the client went away.
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var q *request
	if sw, ok := w.(*statusWriter); ok {
		q = sw.q
	}
	if q != nil {
		q.ev.Outcome = OutcomeUpstreamError
	}
	var bodyErr *error
	if q != nil && q.body != nil {
		bodyErr = q.body.err.Load()
	}
	switch {
	case bodyErr != nil:
		// The client's body was malformed (bad chunk framing, too large):
		// the client's fault, not the upstream's.
		q.ev.Outcome = OutcomeBadRequest
		w.Header().Set("Connection", "close")
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusBadRequest,
			Title:  "Bad Request",
			Detail: "the request body could not be read: " + (*bodyErr).Error(),
		})
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusGatewayTimeout,
			Title:  "Gateway Timeout",
			Detail: "the upstream did not answer in time",
		})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client disconnected; there is nobody to answer. 499 is what
		// operators know from nginx; it only reaches logs and metrics.
		w.WriteHeader(499)
	default:
		h.log.Warn("upstream error", "url", r.URL.Redacted(), "err", err)
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusBadGateway,
			Title:  "Bad Gateway",
			Detail: "the upstream could not be reached or answered badly",
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bufferPool recycles ReverseProxy copy buffers.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

// Get returns a 32 KiB buffer.
func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufferSize)
}

// Put recycles buf.
func (b *bufferPool) Put(buf []byte) {
	if cap(buf) != copyBufferSize {
		return
	}
	buf = buf[:copyBufferSize]
	b.p.Put(&buf)
}
