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
	s = trimIP(s)
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
		// "v4:port", the common RemoteAddr: the port is checked as
		// netip.ParseAddrPort checks it, by hand, and dropped (its
		// ParseUint cost more than parsing the address).
		i := strings.IndexByte(s, ':')
		if !validPort(s[i+1:]) {
			return netip.Addr{}, false
		}
		b, err := netip.ParseAddr(s[:i])
		if err != nil {
			return netip.Addr{}, false
		}
		a = b
	default:
		b, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = b
	}
	return a.WithZone("").Unmap(), true
}

// trimIP trims the spaces, tabs and double quotes around s.
// (strings.Trim builds its set of bytes on every call.)
func trimIP(s string) string {
	cut := func(c byte) bool { return c == ' ' || c == '\t' || c == '"' }
	for len(s) > 0 && cut(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && cut(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// validPort reports whether s is a port as strconv.ParseUint(s, 10, 16)
// accepts it: one or more decimal digits (leading zeros allowed) whose
// value is at most 65535.
func validPort(s string) bool {
	if s == "" {
		return false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		if v = v*10 + int(c-'0'); v > 65535 {
			return false
		}
	}
	return true
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
