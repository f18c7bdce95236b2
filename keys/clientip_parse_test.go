package keys

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// parseIPModel is ParseIP as the standard library alone would write it:
// the oracle of the hand-rolled trimming and port check.
func parseIPModel(s string) (netip.Addr, bool) {
	s = strings.Trim(s, " \t\"")
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	switch {
	case s[0] == '[':
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
