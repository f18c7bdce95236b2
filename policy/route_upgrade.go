package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/gateway/keys"
)

// buildUpgrades checks a route's upgrades: each a protocol name or
// name/version (RFC 9110 section 7.8: tokens), never h2c or h2 (HTTP/2 is
// hop by hop: a tunnel to an upstream speaking it would carry streams to
// any path, past every route and limit), listed once, on a route with an
// HTTP/1.1 upstream (a respond route upgrades nothing, and HTTP/2 to an
// h2c:// upstream has no Upgrade). It returns them in lower case.
func buildUpgrades(list []string, rt *Route, path string, e *problems) []string {
	if len(list) == 0 {
		return nil
	}
	switch {
	case rt.Respond != nil:
		e.add(path, "applies only to a route with an upstream")
		return nil
	case rt.H2C:
		e.add(path, "an h2c:// upstream speaks HTTP/2, which has no Upgrade")
		return nil
	}
	var out []string
	for i, s := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		name, version, versioned := strings.Cut(s, "/")
		switch lower := strings.ToLower(s); {
		case !keys.IsToken(name) || versioned && !keys.IsToken(version):
			e.add(p, "invalid protocol %q (want a token such as \"websocket\", optionally with /version)", s)
		case strings.EqualFold(name, "h2c") || strings.EqualFold(name, "h2") || strings.EqualFold(name, "http"):
			e.add(p, "%q cannot be allowed: HTTP versions are hop by hop, and a tunnel speaking one would reach the upstream on any path, past every route and limit", s)
		case slices.Contains(out, lower):
			e.add(p, "duplicate protocol %q", s)
		default:
			out = append(out, lower)
		}
	}
	return out
}

// AllowsUpgrade reports whether a request's Upgrade values name only
// protocols rt allows (compared without case; an allowed name without a
// version allows every version of it), and at least one. A list naming
// any other protocol is refused whole: the upstream must not be offered a
// protocol the route does not allow, and the client asked for one of them,
// not for a subset. h2c and h2 are never allowed.
func (rt *Route) AllowsUpgrade(values []string) bool {
	if len(rt.Upgrades) == 0 {
		return false
	}
	n := 0
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				continue // an empty list element (RFC 9110 section 5.6.1)
			}
			if !rt.allowsProtocol(tok) {
				return false
			}
			n++
		}
	}
	return n > 0
}

// allowsProtocol reports whether one Upgrade token is allowed on rt.
func (rt *Route) allowsProtocol(tok string) bool {
	name, _, _ := strings.Cut(tok, "/")
	if strings.EqualFold(name, "h2c") || strings.EqualFold(name, "h2") {
		return false
	}
	for _, a := range rt.Upgrades {
		if strings.EqualFold(a, tok) || !strings.Contains(a, "/") && strings.EqualFold(a, name) {
			return true
		}
	}
	return false
}
