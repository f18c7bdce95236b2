package policy

import (
	"strings"
)

// Match normalises the request path (NormalizePath) and returns the route
// for the request with the normal path it was matched on, which is the
// path to forward (see Route.ForwardPath). The route is nil when none
// matches; err is a *PathError when the path is rejected.
//
// host is the request's Host (a port and a trailing dot are ignored, case
// is not significant); method is compared exactly, and a route that lists
// GET also takes HEAD (as net/http does); path is the escaped request path
// without its query. A route matches when its host is empty or equal to
// host, its methods are empty or cover method, and its path_prefix is a
// segment-wise prefix of the normal path ("/v1/search" matches "/v1/search"
// and "/v1/search/x", not "/v1/searchx"; "/" matches everything).
//
// Among matching routes, one with an explicit host beats a host-less one;
// then the longest path_prefix wins; then a route that lists the method
// beats one that allows all; then the earlier route.
//
// The route is chosen twice: on the normal path byte for byte, and in the
// loose reading some upstreams apply (";params" dropped, "%2F" as '/',
// letters without case; see looseHasPrefix). If the two choices differ,
// an upstream could serve the request under another route than the
// gateway counted it for, so the path is rejected. Match does not
// allocate for an already normal path.
func (p *Policy) Match(host, method, path string) (*Route, string, error) {
	path, plain, err := normalize(path)
	if err != nil {
		return nil, path, err
	}
	host = hostOnly(host)
	var strict, wide *Route
	for _, rt := range p.Routes {
		if rt.Host != "" && !strings.EqualFold(rt.Host, host) {
			continue
		}
		if len(rt.Methods) > 0 && !covers(rt.Methods, method) {
			continue
		}
		if hasPathPrefix(path, rt.PathPrefix) {
			if strict == nil || beats(rt, strict) {
				strict = rt
			}
			if wide == nil || beats(rt, wide) {
				wide = rt
			}
			continue
		}
		// The loose reading. A plain path (no escape, ';' or capital)
		// reads as it is, so it is compared with the prefix's loose form;
		// anything else is read loosely on both sides.
		switch {
		case plain && rt.loose == looseSame:
			continue
		case plain && rt.loose == looseFolded:
			if !hasPathPrefix(path, rt.foldedPrefix) {
				continue
			}
		case !looseHasPrefix(path, rt.PathPrefix):
			continue
		}
		if wide == nil || beats(rt, wide) {
			wide = rt
		}
	}
	if strict != wide && strict != nil {
		return nil, path, errAmbiguous
	}
	return strict, path, nil
}

// beats reports whether a is a more specific match than b.
func beats(a, b *Route) bool {
	if (a.Host != "") != (b.Host != "") {
		return a.Host != ""
	}
	if len(a.PathPrefix) != len(b.PathPrefix) {
		return len(a.PathPrefix) > len(b.PathPrefix)
	}
	return len(a.Methods) > 0 && len(b.Methods) == 0
}

// covers reports whether a route listing methods takes method: listed, or
// HEAD when GET is listed (a HEAD is a GET without the body, and net/http
// answers it so).
func covers(methods []string, method string) bool {
	for _, m := range methods {
		if m == method || method == "HEAD" && m == "GET" {
			return true
		}
	}
	return false
}

// hostOnly strips a port and a trailing dot from a Host value.
func hostOnly(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return h[:i+1]
		}
		return h
	}
	if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		h = h[:i]
	}
	return strings.TrimSuffix(h, ".")
}

// samePrefix reports whether two normal prefixes match the same paths in
// the loose reading ("/api" and "/API").
func samePrefix(a, b string) bool {
	return a == b || looseHasPrefix(a, b) && looseHasPrefix(b, a)
}
