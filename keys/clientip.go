package keys

import (
	"net/netip"
	"strings"
)

// xffHeader is the canonical name of the header read for proxied clients.
// X-Real-IP is never read: it cannot express a chain and is trivially forged.
const xffHeader = "X-Forwarded-For"

// ParseIP parses one address as it appears in X-Forwarded-For or
// RemoteAddr, leniently in the manner of realclientip-go: surrounding spaces
// and double quotes are trimmed; a port ("1.2.3.4:80", "[::1]:80"), square
// brackets ("[::1]") and an IPv6 zone ("fe80::1%eth0") are accepted and
// dropped; an IPv4-mapped IPv6 address is unmapped to IPv4. Anything else
// ("unknown", "_hidden", an empty item, garbage) is reported as invalid.
func ParseIP(s string) (netip.Addr, bool) {
	s = strings.Trim(s, " \t\"")
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	switch {
	case s[0] == '[':
		// "[v6]:port" or "[v6]".
		if ap, err := netip.ParseAddrPort(s); err == nil {
			a = ap.Addr()
			break
		}
		if s[len(s)-1] != ']' {
			return netip.Addr{}, false
		}
		b, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !b.Is6() {
			return netip.Addr{}, false
		}
		a = b
	case strings.Count(s, ":") == 1:
		// "v4:port"; parsed directly so that no error value is built on
		// the common path of RemoteAddr.
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	default:
		b, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = b
	}
	return a.WithZone("").Unmap(), true
}

// trusted reports whether a lies in one of the prefixes.
func trusted(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP resolves the client address of a request whose immediate peer is
// peer (already parsed; invalid if RemoteAddr could not be parsed) and whose
// X-Forwarded-For header lines are xff, in order.
//
// X-Forwarded-For is believed only when the peer is trusted. The lines are
// read as one comma-separated list, right to left; trusted hops are skipped
// and the first untrusted entry is the client. If every entry is trusted the
// leftmost one is the client. If the selected entry is not a valid address
// the peer is the client and fallback is true.
func clientIP(peer netip.Addr, xff []string, prefixes []netip.Prefix) (ip netip.Addr, fallback bool) {
	if !peer.IsValid() || len(xff) == 0 || !trusted(peer, prefixes) {
		return peer, false
	}
	var leftmost netip.Addr
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for more := true; more; {
			item := line
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				item, line = line[j+1:], line[:j]
			} else {
				more = false
			}
			a, ok := ParseIP(item)
			if !ok {
				return peer, true
			}
			if !trusted(a, prefixes) {
				return a, false
			}
			leftmost = a
		}
	}
	return leftmost, false
}
