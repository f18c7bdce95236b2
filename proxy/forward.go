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

// ownedHeaders finds, in one pass over a request's headers, those the
// upstream must not receive from a client: the gateway-owned ones in any
// spelling, and the respelled ones that CGI, WSGI, PHP and Rack read as
// an owned one. Those frameworks map '-' and '_' to the same variable
// (HTTP_X_REAL_IP), so "X_Real_IP" or "x-real_ip" would pose as the
// header the gateway sets; whether the peer is trusted does not matter for
// them: no proxy we trust sets a header spelled so. A route builds one
// when its ReverseProxy is built.
type ownedHeaders struct {
	// lengths has bit n set when some name this strips is n bytes long:
	// most request headers are passed over on their length alone.
	lengths uint64
	// user is the identity's user header, "" for none: a trusted peer's
	// copy (canonical spelling) is kept.
	user string
	// consumer and plan are the headers the gateway names the consumer
	// and plan in, "" when not forwarded.
	consumer, plan string
}

// newOwnedHeaders returns the owned headers of a route whose identity
// reads the user from userHeader and that forwards the consumer and plan
// in the named headers ("" for none).
func newOwnedHeaders(userHeader, consumer, plan string) *ownedHeaders {
	o := &ownedHeaders{user: userHeader, consumer: consumer, plan: plan}
	names := append(append([]string{"Upgrade", userHeader, consumer, plan}, gatewayOwned...), forwardingHeaders...)
	for _, n := range names {
		if n == "" {
			continue
		}
		if len(n) >= 64 {
			o.lengths = ^uint64(0) // too long for the mask: look at every name
			continue
		}
		o.lengths |= 1 << len(n)
	}
	return o
}

// strip deletes from h every header a client may not send upstream: the
// gateway-owned ones and their respellings, the user header unless the
// peer is trusted (its respellings always), the respelled forwarding
// headers (ReverseProxy itself drops the canonical ones), the consumer and
// plan headers in any spelling, and a client's request to switch to
// cleartext HTTP/2 ("Upgrade: h2c", with its Connection header).
// Forwarded, an upstream accepting it would answer 101 and ReverseProxy
// would tunnel the connection: every HTTP/2 stream the client then sent
// would reach the upstream on any path, past every route and limit (h2c
// smuggling). HTTP/2 is hop by hop; the gateway's clients get it from its
// own listener, and the request goes on as the ordinary HTTP/1.1 request
// it also is. Other upgrades (WebSocket) are forwarded.
// One range over the map replaces a delete per owned name: the map is a
// request's handful of headers, and most are passed over on their length.
func (o *ownedHeaders) strip(h http.Header, peerTrusted bool) {
	h2c := false
	for name := range h {
		if len(name) < 64 && o.lengths&(1<<len(name)) == 0 {
			continue
		}
		switch {
		case name == "Upgrade":
			h2c = wantsH2C(h[name])
		case dashedAny(name, gatewayOwned),
			// A trusted peer's copy in the configured spelling is kept;
			// every other spelling goes, whatever the peer.
			o.user != "" && dashedEqual(name, o.user) && (name != o.user || !peerTrusted),
			strings.IndexByte(name, '_') >= 0 && dashedAny(name, forwardingHeaders),
			o.consumer != "" && dashedEqual(name, o.consumer),
			o.plan != "" && dashedEqual(name, o.plan):
			delete(h, name)
		}
	}
	if h2c {
		delete(h, "Upgrade")
		delete(h, "Connection")
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
// ASCII letters compared without case, on both sides: an operator may name
// a header with '_' (user_header = "X_User"), and its canonical spelling
// "X_user" and the respelled "X-User" are then that header too.
func dashedEqual(name, owned string) bool {
	if len(name) != len(owned) {
		return false
	}
	for i := 0; i < len(name); i++ {
		a, b := name[i], owned[i]
		if a == '_' {
			a = '-'
		}
		if b == '_' {
			b = '-'
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

// wantsH2C reports whether Upgrade values name h2c, however spelled.
func wantsH2C(upgrade []string) bool {
	for _, v := range upgrade {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "h2c") {
				return true
			}
		}
	}
	return false
}

// reverseProxy builds the ReverseProxy of one route.
func (h *Handler) reverseProxy(rt *policy.Route, p *policy.Policy) *httputil.ReverseProxy {
	target := rt.Upstream
	identity := p.Identity
	owned := newOwnedHeaders(identity.UserHeader(), p.Consumers.ForwardConsumer, p.Consumers.ForwardPlan)
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
			owned.strip(pr.Out.Header, peerTrusted)
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
