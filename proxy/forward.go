package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/upstream"
)

// gatewayOwned lists request headers only the gateway may set: client-sent
// copies never reach the upstream. (ReverseProxy already drops Forwarded and
// X-Forwarded-* when Rewrite is used, and every hop-by-hop header, including
// those named in Connection.) The client-address headers that CDNs and
// other proxies set are among them: an upstream may believe any of them.
// So are the headers that make an upstream serve another path or method
// than the request line's (IIS and Symfony read X-Original-Url and
// X-Rewrite-Url as the path; Rack, Express and many others read the
// method overrides): the gateway routed, limited and counted the request
// line, so a client could otherwise reach a limited path through an
// unlimited one, or a limited method through another.
var gatewayOwned = []string{"X-Real-Ip", "X-Client-Ip", "True-Client-Ip", "Cf-Connecting-Ip",
	"X-Gateway-User", "X-Consumer-Id",
	"X-Original-Url", "X-Rewrite-Url", "X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

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
	// route is the route whose upgrades an Upgrade request may ask for;
	// nil allows none.
	route *policy.Route
}

// newOwnedHeaders returns the owned headers of route rt (nil: a route
// allowing no upgrade) whose identity reads the user from userHeader and
// that forwards the consumer and plan in the named headers ("" for none).
func newOwnedHeaders(rt *policy.Route, userHeader, consumer, plan string) *ownedHeaders {
	o := &ownedHeaders{user: userHeader, consumer: consumer, plan: plan, route: rt}
	names := append(append([]string{"Upgrade", userHeader, consumer, plan, requestIDHeader}, gatewayOwned...), forwardingHeaders...)
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
// plan headers in any spelling, and a request to switch protocols that
// the route does not allow (Route.AllowsUpgrade), with its Connection
// header.
//
// An upgrade the upstream accepts (101) turns the connection into a
// tunnel that the gateway counted as one request: whatever the client
// sends on it afterwards passes no route and no limit. So only the
// protocols a route lists in upgrades are offered to the upstream; any
// other Upgrade, and one that lists any protocol not allowed, goes, and
// the request goes on as the ordinary HTTP/1.1 request it also is (an
// upstream answering 101 to it anyway gets a 502: ReverseProxy refuses a
// switch that was not requested). h2c is never allowed ("Upgrade: h2c"
// smuggling: every HTTP/2 stream on the tunnel would reach the upstream
// on any path).
// One range over the map replaces a delete per owned name: the map is a
// request's handful of headers, and most are passed over on their length.
func (o *ownedHeaders) strip(h http.Header, peerTrusted bool) {
	refused := false
	for name := range h {
		if len(name) < 64 && o.lengths&(1<<len(name)) == 0 {
			continue
		}
		switch {
		case name == "Upgrade":
			refused = o.route == nil || !o.route.AllowsUpgrade(h[name])
		case dashedAny(name, gatewayOwned),
			// A trusted peer's copy in the configured spelling is kept;
			// every other spelling goes, whatever the peer.
			o.user != "" && dashedEqual(name, o.user) && (name != o.user || !peerTrusted),
			strings.IndexByte(name, '_') >= 0 && dashedAny(name, forwardingHeaders),
			// X_Request_Id would pose to such an upstream as the id
			// (requestid.go); the canonical one is the gateway's to set.
			strings.IndexByte(name, '_') >= 0 && dashedEqual(name, requestIDHeader),
			o.consumer != "" && dashedEqual(name, o.consumer),
			o.plan != "" && dashedEqual(name, o.plan):
			delete(h, name)
		}
	}
	if refused {
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

// reverseProxy builds the ReverseProxy of one route, whose targets are
// pool. A route whose upstream is Single forwards to it directly, as
// cheaply as a route of one upstream URL always has; any other picks a
// target per attempt in its transport (retry.go).
func (h *Handler) reverseProxy(rt *policy.Route, p *policy.Policy, pool *upstream.Pool) *httputil.ReverseProxy {
	target := rt.Upstream
	balanced := pool != nil && !pool.Spec().Single()
	identity := p.Identity
	owned := newOwnedHeaders(rt, identity.UserHeader(), p.Consumers.ForwardConsumer, p.Consumers.ForwardPlan)
	msgs := h.newMessages(rt, p) // headerrules.go
	// A client must not choose an answer its usage cannot be read from:
	// the scanners do not decode a content-coded body, so on a route
	// whose limits read the answer the client's Accept-Encoding is
	// dropped, and the transport asks for gzip itself and decodes it
	// (usage.go). The client gets the answer uncompressed.
	dropEncoding := readsAnswerBody(rt)
	tags := tagNames(rt) // limit_answer.go
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
			if dropEncoding {
				delete(pr.Out.Header, "Accept-Encoding")
			}
			keepTags(tags, pr.In.Header, pr.Out.Header)
			setConsumerHeaders(&p.Consumers, pr.In, pr.Out.Header)
			msgs.rewrite(pr)
			// The path is already the one to forward (Route.ForwardPath,
			// strip_prefix applied): SetURL only joins it to the
			// upstream's base path.
			if balanced {
				// The transport points each attempt at its target;
				// the Host header is the target's, as SetURL makes it.
				pr.Out.Host = ""
			} else {
				pr.SetURL(target)
			}
			pr.SetXForwarded()
			h.addVia(pr.Out.Header) // loop.go
			if h.tracer != nil {
				h.tracer.Inject(pr.In.Context(), pr.Out.Header)
			}
		},
		Transport:    routeTransport(h.upstreamTransport(rt), rt),
		BufferPool:   &h.buffers,
		ErrorHandler: h.upstreamError,
		ErrorLog:     slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
	if balanced {
		rp.Transport = routeTransport(&balancedTransport{h: h, pool: pool, spec: pool.Spec(), next: h.transport}, rt)
	}
	rp.ModifyResponse = h.modifyResponse(rt, msgs)
	return rp
}

// upstreamTransport returns the transport of rt's upstream: the shared one,
// or for an h2c:// upstream the cleartext HTTP/2 one.
func (h *Handler) upstreamTransport(rt *policy.Route) http.RoundTripper {
	if !rt.H2C {
		return h.transport
	}
	return h.h2cTransport()
}

// h2cTransport returns the transport of h2c:// targets, made on first
// use.
func (h *Handler) h2cTransport() http.RoundTripper {
	h.h2cOnce.Do(func() { h.h2c = NewH2CTransport() })
	return h.h2c
}
