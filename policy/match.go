package policy

import (
	"path"
	"strings"
)

// Match returns the route for a request, or nil when none matches.
//
// host is the request's Host (a port and a trailing dot are ignored, case
// is not significant); method is compared exactly; path is the request path
// as received — anything from '?' on is ignored and the rest is cleaned by
// CleanPath (no percent-decoding), so respellings such as "//v1/./search"
// reach the same route. A route matches when its host is empty or equal to
// host, its methods are empty or contain method, and its path_prefix is a
// segment-wise prefix of the path ("/v1/search" matches "/v1/search" and
// "/v1/search/x", not "/v1/searchx"; "/" matches everything).
//
// Among matching routes, one with an explicit host beats a host-less one;
// then the longest path_prefix wins; then a route that lists the method
// beats one that allows all; then the earlier route. Match does not
// allocate unless the path needs cleaning.
func (p *Policy) Match(host, method, path string) *Route {
	host = hostOnly(host)
	path = CleanPath(path)
	var best *Route
	for _, rt := range p.Routes {
		if rt.Host != "" && !strings.EqualFold(rt.Host, host) {
			continue
		}
		if len(rt.Methods) > 0 && !contains(rt.Methods, method) {
			continue
		}
		if !hasPathPrefix(path, rt.PathPrefix) {
			continue
		}
		if best == nil || beats(rt, best) {
			best = rt
		}
	}
	return best
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

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// hasPathPrefix reports whether prefix is a segment-wise prefix of p.
func hasPathPrefix(p, prefix string) bool {
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return len(p) == len(prefix) || prefix[len(prefix)-1] == '/' || p[len(prefix)] == '/'
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

// CleanPath returns the canonical form of a request path used for route
// matching: the part before any '?', rooted at "/", with "//" collapsed and
// "." and ".." segments resolved (never above the root). A trailing slash is
// kept. Nothing is percent-decoded. An already clean path is returned as is,
// without allocating.
func CleanPath(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	if isClean(p) {
		return p
	}
	c := path.Clean(p)
	if p[len(p)-1] == '/' && c != "/" {
		c += "/"
	}
	return c
}

// isClean reports whether the rooted path p has no empty, "." or ".."
// segment (a trailing slash is allowed).
func isClean(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		rest := p[i+1:]
		switch {
		case rest == "":
			// trailing slash: fine
		case rest[0] == '/':
			return false
		case rest[0] == '.':
			if len(rest) == 1 || rest[1] == '/' {
				return false
			}
			if rest[1] == '.' && (len(rest) == 2 || rest[2] == '/') {
				return false
			}
		}
	}
	return true
}
