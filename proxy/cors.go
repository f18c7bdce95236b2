package proxy

import (
	"net/http"
	"strings"

	"github.com/tollgate/gateway/policy"
)

// preflightVary is the Vary of a preflight's answer: it depends on all
// three request headers.
var preflightVary = []string{"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"}

var (
	corsTrue = []string{"true"}
	corsAny  = []string{"*"}
)

// preflight answers q.r when it is a CORS preflight (OPTIONS with Origin
// and Access-Control-Request-Method) for a route with cors, and reports
// whether it did. The route is the one the method asked for would match:
// a route restricted to GET and POST still has its preflights answered.
// A preflight is never forwarded and counted by no limit: it is the
// browser asking, not the page. An origin, method or header that is not
// allowed gets the same 204 without the allow headers, which the browser
// reads as a refusal.
func (h *Handler) preflight(q *request, raw string) bool {
	r, w, p := q.r, &q.w, q.snap.p
	origin := firstValue(r.Header, "Origin")
	method := firstValue(r.Header, "Access-Control-Request-Method")
	if origin == "" || method == "" {
		return false
	}
	rt, path, err := p.Match(r.Host, method, raw)
	if err != nil || rt == nil || rt.CORS == nil {
		return false
	}
	c := rt.CORS
	ev := &q.ev
	ev.Route, ev.Path, ev.Outcome = rt.Name, path, OutcomeForwarded
	hd := w.Header()
	hd["Vary"] = preflightVary
	reqHeaders := strings.Join(r.Header["Access-Control-Request-Headers"], ",")
	if c.AllowsOrigin(origin) && c.AllowsMethod(method) && c.AllowsHeaders(reqHeaders) {
		setAllowOrigin(hd, c, origin)
		hd["Access-Control-Allow-Methods"] = c.AllowMethods
		if reqHeaders != "" {
			// Every name was checked to be an allowed token.
			hd["Access-Control-Allow-Headers"] = []string{reqHeaders}
		}
		if c.MaxAge != nil {
			hd["Access-Control-Max-Age"] = c.MaxAge
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}

// setAllowOrigin names the allowed origin: "*" for any origin without
// credentials, else the request's own Origin, with credentials allowed
// when configured.
func setAllowOrigin(hd http.Header, c *policy.CORS, origin string) {
	if c.AnyOrigin && !c.Credentials {
		hd["Access-Control-Allow-Origin"] = corsAny
	} else {
		hd["Access-Control-Allow-Origin"] = []string{origin}
	}
	if c.Credentials {
		hd["Access-Control-Allow-Credentials"] = corsTrue
	}
}

// setCORSHeaders writes the CORS headers of an answer on a route with
// cors, the upstream's or the gateway's own (a 429 a page must be able to
// read): the upstream's Access-Control-* headers go (the route's cors
// table is the one word on them), then an allowed origin gets the allow
// and expose headers (with "*", every answer). Vary: Origin tells caches
// that the answer depends on it.
func setCORSHeaders(hd http.Header, c *policy.CORS, origin string) {
	dropCORSHeaders(hd)
	if !c.AnyOrigin || c.Credentials {
		hd["Vary"] = append(hd["Vary"], "Origin")
	}
	if origin == "" && !c.AnyOrigin {
		return
	}
	// With origins = ["*"] (never with credentials) the answer names "*"
	// whether or not the request had an Origin: it does not vary, so a
	// shared cache may give the answer to a request without Origin to
	// any page, which must then be able to read it.
	setAllowOrigin(hd, c, origin)
	hd["Access-Control-Expose-Headers"] = c.Expose
}

// dropCORSHeaders removes an upstream's Access-Control-* headers.
func dropCORSHeaders(hd http.Header) {
	for k := range hd {
		if len(k) > 15 && k[:15] == "Access-Control-" {
			delete(hd, k)
		}
	}
}
