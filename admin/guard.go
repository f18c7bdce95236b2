package admin

import (
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate/gateway/headers"
)

// Guard wraps everything the admin listener serves against a browser
// turned on it. hosts are the admin.allowed_hosts names, lower case and
// without a trailing dot (policy.Policy.AdminHosts).
//
//   - The Host header must be an IP literal, "localhost" or one of hosts,
//     with any port, else 421: a page whose DNS name an attacker rebinds
//     to this listener sends its own name, so it cannot read the answers
//     (DNS rebinding).
//   - A request that may change state (any method but GET, HEAD and
//     OPTIONS) is refused with 403 when its Origin is not the listener's
//     own (the Host it was sent to) or its Sec-Fetch-Site is anything but
//     same-origin or none: a page elsewhere cannot make the operator's
//     browser change the configuration (CSRF). A request with neither
//     header (curl, a script) passes.
//   - A read (GET, HEAD, OPTIONS) with the same signs of another site is
//     refused with 403 too, unless it is a top-level navigation (a link
//     the operator follows): the other page could not read the answer,
//     but some reads cost the gateway dearly or change what it does
//     (/debug/pprof/ starts a CPU profile or an execution trace for as
//     long as the request lasts, and goroutine?debug=2 stops the world
//     for its dump), and an <img> or a frame loop would repeat them for
//     as long as the page is open.
//   - Such a request with a body must send it as application/toml or
//     application/json, else 415: the media types a browser sends across
//     sites without asking first (text/plain, forms, multipart) never
//     reach a handler.
//
// The token, when set, is checked after this, by RequireToken.
func Guard(hosts []string, next http.Handler) http.Handler {
	g := &guard{next: next, hosts: make(map[string]struct{}, len(hosts))}
	for _, h := range hosts {
		g.hosts[h] = struct{}{}
	}
	return g
}

type guard struct {
	next  http.Handler
	hosts map[string]struct{}
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, port, ok := splitHost(r.Host)
	if !ok || !g.allowed(host) {
		problem(w, http.StatusMisdirectedRequest, "the admin listener answers to an IP address, localhost or a name in admin.allowed_hosts, not to Host "+
			strconv.Quote(headers.Sanitize(r.Host)))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if why := crossSite(r, host, port); why != "" && !topLevelNavigation(r) {
			problem(w, http.StatusForbidden, why+": another site's page may link to the admin listener, not load from it (a fetch, image, script or frame)")
			return
		}
	default:
		if why := crossSite(r, host, port); why != "" {
			problem(w, http.StatusForbidden, why+": the admin API does not change state for another site's page")
			return
		}
		if !acceptedBody(r) {
			problem(w, http.StatusUnsupportedMediaType, "a request that changes state sends its body as application/toml or application/json (Content-Type)")
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// allowed reports whether the normalised host h may be served.
func (g *guard) allowed(h string) bool {
	if h == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	_, ok := g.hosts[h]
	return ok
}

// splitHost splits a Host header (or an Origin's host) into its host,
// normalised for comparison, and its port ("" for none). An IPv6 literal
// must be bracketed; the host is lower-cased and loses one trailing dot;
// an IP literal is written canonically ("::1" for "[0:0::1]"). ok is false
// for an empty or malformed value.
func splitHost(hostport string) (host, port string, ok bool) {
	h := hostport
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", "", false
		}
		host, h = h[1:end], h[end+1:]
		a, err := netip.ParseAddr(strings.Replace(host, "%25", "%", 1))
		if err != nil || !a.Is6() {
			return "", "", false
		}
		host = a.String()
		if h != "" && h[0] != ':' {
			return "", "", false
		}
		port = strings.TrimPrefix(h, ":")
	} else {
		host = h
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			host, port = h[:i], h[i+1:]
		}
		if strings.IndexByte(host, ':') >= 0 {
			return "", "", false // an IPv6 literal without brackets
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if a, err := netip.ParseAddr(host); err == nil {
			host = a.String()
		}
	}
	if host == "" || len(port) > 5 {
		return "", "", false
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return "", "", false
		}
	}
	return host, port, true
}

// crossSite says why r comes from another site's page, or "" when it
// does not: an Origin other than the host:port r was sent to ("null"
// included), or a Sec-Fetch-Site other than same-origin and none.
func crossSite(r *http.Request, host, port string) string {
	if v := r.Header.Values("Sec-Fetch-Site"); len(v) > 0 {
		if len(v) > 1 || (v[0] != "same-origin" && v[0] != "none") {
			return "Sec-Fetch-Site " + strconv.Quote(headers.Sanitize(strings.Join(v, ", ")))
		}
	}
	if v := r.Header.Values("Origin"); len(v) > 0 {
		if len(v) > 1 || !sameOrigin(v[0], host, port) {
			return "Origin " + strconv.Quote(headers.Sanitize(strings.Join(v, ", "))) + " is not this listener's"
		}
	}
	return ""
}

// topLevelNavigation reports whether r is a browser's top-level
// navigation by GET or HEAD (Sec-Fetch-Mode navigate, Sec-Fetch-Dest
// document, no Origin: a link followed or an address typed), the one
// kind of read another site may start. A frame's navigation (Dest
// iframe) is not one: a page can load frames in a loop, unseen.
func topLevelNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	mode, dest := r.Header.Values("Sec-Fetch-Mode"), r.Header.Values("Sec-Fetch-Dest")
	return len(mode) == 1 && mode[0] == "navigate" && len(dest) == 1 && dest[0] == "document" &&
		len(r.Header.Values("Origin")) == 0
}

// sameOrigin reports whether the serialised origin o names host:port, a
// missing port being the scheme's default on either side.
func sameOrigin(o, host, port string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" ||
		strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return false
	}
	def := ""
	switch strings.ToLower(u.Scheme) {
	case "http":
		def = "80"
	case "https":
		def = "443"
	default:
		return false // "null", file:, extensions
	}
	oh, op, ok := splitHost(u.Host)
	if !ok || oh != host {
		return false
	}
	return samePort(op, port, def)
}

// samePort compares two ports, "" standing for def, by number ("09090"
// is 9090).
func samePort(a, b, def string) bool {
	if a == "" {
		a = def
	}
	if b == "" {
		b = def
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return err1 == nil && err2 == nil && x == y
}

// acceptedBody reports whether r has no body or sends it as
// application/toml or application/json. "No body" is a Content-Length of
// 0; a chunked body (length unknown) needs the media type like any other.
// One Content-Type line of one media type: a browser reads "a, b" as b.
func acceptedBody(r *http.Request) bool {
	if r.ContentLength == 0 {
		return true
	}
	v := r.Header.Values("Content-Type")
	if len(v) != 1 || strings.IndexByte(v[0], ',') >= 0 {
		return false
	}
	mt, _, err := mime.ParseMediaType(v[0])
	return err == nil && (mt == "application/toml" || mt == "application/json")
}
