package keys

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// parseIPModel is ParseIP written independently: a bracketed host runs to
// the last ']' and is IPv6, an unbracketed one is split from its port by
// net.SplitHostPort (which refuses a bare IPv6 address, then read whole),
// a port is a decimal number that fits 16 bits, and the address is
// netip.ParseAddr's. It is the oracle of the hand-rolled trimming and
// port check.
func parseIPModel(s string) (netip.Addr, bool) {
	s = strings.Trim(s, " \t\"")
	host, port, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		end := strings.LastIndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = s[1:end], s[end+1:]
		if port != "" {
			if port[0] != ':' {
				return netip.Addr{}, false
			}
			port, hasPort = port[1:], true
		}
	} else if h, p, err := net.SplitHostPort(s); err == nil {
		host, port, hasPort = h, p, true
	}
	if hasPort {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || strings.HasPrefix(s, "[") && !a.Is6() {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// parseIPCases are addresses as clients and proxies write them, and the
// spellings an attacker would try on the port and the trimming.
var parseIPCases = []string{
	"1.2.3.4", "1.2.3.4:80", " 1.2.3.4:80 ", "\"1.2.3.4:80\"", "\t1.2.3.4\t",
	"1.2.3.4:", "1.2.3.4:0", "1.2.3.4:65535", "1.2.3.4:65536", "1.2.3.4:0000000000080",
	"1.2.3.4:99999999999999999999999", "1.2.3.4:+80", "1.2.3.4:-1", "1.2.3.4:8_0", "1.2.3.4:0x50",
	"1.2.3.4: 80", "1.2.3.4 :80", ":80", "1.2.3:80", "1.2.3.4.5:80", "01.2.3.4:80",
	"1.2.3.4%eth0:80", "::1", "[::1]:80", "[::1]", "[::ffff:1.2.3.4]:80", "::ffff:1.2.3.4",
	"fe80::1%eth0", "[fe80::1%eth0]:80", "unknown", "_hidden", "", " ", "\"\"", "1.2.3.4:8 0",
}

// TestParseIPMatchesModel: every case parses as the standard library's
// own parsing would.
func TestParseIPMatchesModel(t *testing.T) {
	for _, s := range parseIPCases {
		a, ok := ParseIP(s)
		b, okB := parseIPModel(s)
		if a != b || ok != okB {
			t.Errorf("ParseIP(%q) = %v %v, the standard library's %v %v", s, a, ok, b, okB)
		}
	}
	for p := range 70000 {
		s := "10.0.0.1:" + strconv.Itoa(p)
		if _, ok := ParseIP(s); ok != (p <= 65535) {
			t.Errorf("ParseIP(%q) ok %v", s, ok)
		}
	}
}

// FuzzParseIP holds ParseIP to the standard library's parsing on any
// input.
func FuzzParseIP(f *testing.F) {
	for _, s := range parseIPCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseIP(s)
		b, okB := parseIPModel(s)
		if a != b || ok != okB {
			t.Errorf("ParseIP(%q) = %v %v, the standard library's %v %v", s, a, ok, b, okB)
		}
	})
}
