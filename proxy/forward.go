package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"

	"github.com/tollgate/gateway/policy"
)

// gatewayOwned lists request headers only the gateway may set: client-sent
// copies never reach the upstream. (ReverseProxy already drops Forwarded and
// X-Forwarded-* when Rewrite is used, and every hop-by-hop header, including
// those named in Connection.) The client-address headers that CDNs and
// other proxies set are among them: an upstream may believe any of them.
var gatewayOwned = []string{"X-Real-Ip", "X-Client-Ip", "True-Client-Ip", "Cf-Connecting-Ip",
	"X-Gateway-User", "X-Consumer-Id"}

// forwardingHeaders are the headers ReverseProxy owns (SetXForwarded).
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// firstValue is h.Get(name) for a canonical name, without canonicalizing
// it on every request.
func firstValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// stripRespelled deletes every header whose name contains '_' and reads as
// an owned header once '_' is taken for '-', ignoring case ("X_Real_IP",
// "x-real_ip"): CGI, WSGI, PHP and Rack map '-' and '_' to the same
// variable (HTTP_X_REAL_IP), so such a header would pose as the one the
// gateway sets. Whether the peer is trusted does not matter: no proxy we
// trust sets a header spelled so.
func stripRespelled(h http.Header, userHeader string) {
	for name := range h {
		if strings.IndexByte(name, '_') < 0 {
			continue
		}
		if userHeader != "" && dashedEqual(name, userHeader) || dashedAny(name, gatewayOwned) || dashedAny(name, forwardingHeaders) {
			delete(h, name)
		}
	}
}

func dashedAny(name string, owned []string) bool {
	for _, o := range owned {
		if dashedEqual(name, o) {
			return true
		}
	}
	return false
}

// dashedEqual reports whether name equals owned with '_' read as '-' and
// ASCII letters compared without case.
func dashedEqual(name, owned string) bool {
	if len(name) != len(owned) {
		return false
	}
	for i := 0; i < len(name); i++ {
		a, b := name[i], owned[i]
		if a == '_' {
			a = '-'
		}
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// dropH2CUpgrade removes a client's request to switch to cleartext HTTP/2
// ("Upgrade: h2c") from the upstream request, which then goes as the
// ordinary HTTP/1.1 request it also is. Forwarded, an upstream accepting
// it would answer 101 and ReverseProxy would tunnel the connection: every
// HTTP/2 stream the client then sent would reach the upstream on any path,
// past every route and limit (h2c smuggling). HTTP/2 is hop by hop; the
// gateway's clients get it from its own listener. Other upgrades
// (WebSocket) are forwarded as before.
func dropH2CUpgrade(h http.Header) {
	for _, v := range h["Upgrade"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "h2c") {
				delete(h, "Upgrade")
				delete(h, "Connection")
				return
			}
		}
	}
}

// reverseProxy builds the ReverseProxy of one route.
func (h *Handler) reverseProxy(rt *policy.Route, p *policy.Policy) *httputil.ReverseProxy {
	target := rt.Upstream
	identity := p.Identity
	userHeader := identity.UserHeader()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			peerTrusted := identity.PeerTrusted(pr.In)
			if peerTrusted {
				// Keep the chain our trusted proxies built; SetXForwarded
				// appends the peer to it.
				if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 {
					pr.Out.Header["X-Forwarded-For"] = append([]string(nil), xff...)
				}
			}
			// The names are canonical (TestOwnedHeadersCanonical): a
			// plain delete, without Header.Del canonicalizing each again.
			for _, name := range gatewayOwned {
				delete(pr.Out.Header, name)
			}
			dropH2CUpgrade(pr.Out.Header)
			if userHeader != "" && !peerTrusted {
				delete(pr.Out.Header, userHeader)
			}
			stripRespelled(pr.Out.Header, userHeader)
			setConsumerHeaders(&p.Consumers, pr.In, pr.Out.Header)
			// The path is already the one to forward (Route.ForwardPath,
			// strip_prefix applied): SetURL only joins it to the
			// upstream's base path.
			pr.SetURL(target)
			pr.SetXForwarded()
			if h.tracer != nil {
				h.tracer.Inject(pr.In.Context(), pr.Out.Header)
			}
		},
		Transport:    routeTransport(h.upstreamTransport(rt), rt),
		BufferPool:   &h.buffers,
		ErrorHandler: h.upstreamError,
		ErrorLog:     slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
	if countsResponse(rt) {
		rp.ModifyResponse = h.recordResponse
	}
	return rp
}

// upstreamTransport returns the transport of rt's upstream: the shared one,
// or for an h2c:// upstream the cleartext HTTP/2 one.
func (h *Handler) upstreamTransport(rt *policy.Route) http.RoundTripper {
	if !rt.H2C {
		return h.transport
	}
	h.h2cOnce.Do(func() { h.h2c = NewH2CTransport() })
	return h.h2c
}
