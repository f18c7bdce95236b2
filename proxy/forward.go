package proxy

import (
	"log/slog"
	"net/http/httputil"
	"strings"

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
