package policy

import (
	"net/url"
	"strings"
)

// normalPrefix returns the normal form of a route's path_prefix, or why it
// cannot be one. A prefix may not contain ';', "%2F" or "%3B": no request
// could match it in the same way on every upstream.
func normalPrefix(s string) (string, error) {
	p, err := NormalizePath(s)
	if err != nil {
		return "", err
	}
	if strings.IndexByte(p, ';') >= 0 || strings.Contains(p, "%2F") || strings.Contains(p, "%3B") {
		return "", errPrefixDelim
	}
	return p, nil
}

// hasPathPrefix reports whether prefix is a segment-wise prefix of the
// normal path p, byte for byte (the strict reading).
func hasPathPrefix(p, prefix string) bool {
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return len(p) == len(prefix) || prefix[len(prefix)-1] == '/' || p[len(prefix)] == '/'
}

// ForwardPath returns the path to send upstream for a request matched to
// rt on the normal path p: p itself, or with strip_prefix the rest of p
// after the route's prefix ("/" at least). p must be the normal path the
// route was matched on. raw is the unescaped form for url.URL.Path.
//
// The result is a normal path, so joined to the upstream's base path it
// cannot climb out of it: it has no dot segment in any reading.
func (rt *Route) ForwardPath(p string) (escaped, raw string) {
	if rt.StripPrefix && rt.PathPrefix != "/" && hasPathPrefix(p, rt.PathPrefix) {
		p = p[len(rt.PathPrefix):]
		if p == "" || p[0] != '/' {
			p = "/" + p
		}
	}
	u, err := url.PathUnescape(p)
	if err != nil { // cannot happen for a normal path
		return "/", "/"
	}
	return p, u
}
