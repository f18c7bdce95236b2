package keys

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// testTrusted are the trusted proxies of the client-IP tests. The mapped
// prefix must behave as 192.168.0.0/16.
var testTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
	netip.MustParsePrefix("::ffff:192.168.0.0/112"),
}

func newTestRequest(remote string, xff ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://gw.test/x", nil)
	r.RemoteAddr = remote
	if xff != nil {
		r.Header[xffHeader] = xff
	}
	return r
}

func TestClientIP(t *testing.T) {
	e, err := NewExtractor(Config{Sources: []Source{SourceIP}, TrustedProxies: testTrusted})
	if err != nil {
		t.Fatal(err)
	}
	const (
		untrusted = "203.0.113.5:4711"
		proxy     = "10.1.2.3:4711"
		proxy6    = "[2001:db8:ffff::1]:443"
	)
	tests := []struct {
		name     string
		remote   string
		xff      []string
		realIP   string // X-Real-IP, never read
		want     string // "" = invalid address
		fallback bool
		prefix   string // IPPrefix, when checked
	}{
		// Untrusted peers: the header is ignored.
		{name: "direct client, no header", remote: untrusted, want: "203.0.113.5", prefix: "203.0.113.5/32"},
		{name: "direct client forges XFF", remote: untrusted, xff: []string{"1.2.3.4"}, want: "203.0.113.5"},
		{name: "direct client forges XFF with trusted entries", remote: untrusted, xff: []string{"1.2.3.4, 10.0.0.1"}, want: "203.0.113.5"},
		{name: "direct client forges XFF on several lines", remote: untrusted, xff: []string{"1.2.3.4", "5.6.7.8"}, want: "203.0.113.5"},
		{name: "direct client forges garbage XFF: no fallback", remote: untrusted, xff: []string{"unknown"}, want: "203.0.113.5"},
		{name: "X-Real-IP from untrusted peer", remote: untrusted, realIP: "1.2.3.4", want: "203.0.113.5"},
		{name: "X-Real-IP from trusted peer", remote: proxy, realIP: "1.2.3.4", want: "10.1.2.3"},
		{name: "peer without port", remote: "203.0.113.7", want: "203.0.113.7"},
		{name: "IPv6 peer", remote: "[2001:db8:1:2:3:4:5:6]:80", want: "2001:db8:1:2:3:4:5:6", prefix: "2001:db8:1:2::/64"},
		// Trusted peer: right to left, first untrusted wins.
		{name: "trusted proxy, one entry", remote: proxy, xff: []string{"1.2.3.4"}, want: "1.2.3.4"},
		{name: "no XFF from trusted proxy", remote: proxy, want: "10.1.2.3"},
		{name: "spoofed left entries", remote: proxy, xff: []string{"evil, 6.6.6.6"}, want: "6.6.6.6"},
		{name: "trusted hop skipped", remote: proxy, xff: []string{"6.6.6.6, 10.0.0.2"}, want: "6.6.6.6"},
		{name: "several trusted hops skipped", remote: proxy, xff: []string{"1.1.1.1, 2.2.2.2, 10.0.0.3, 10.0.0.2"}, want: "2.2.2.2"},
		{name: "all hops trusted: leftmost", remote: proxy, xff: []string{"10.0.0.9, 10.0.0.8"}, want: "10.0.0.9"},
		{name: "two lines", remote: proxy, xff: []string{"1.1.1.1", "2.2.2.2"}, want: "2.2.2.2"},
		{name: "two lines, trusted last line", remote: proxy, xff: []string{"1.1.1.1, 2.2.2.2", "10.0.0.5"}, want: "2.2.2.2"},
		{name: "two lines, all of last trusted", remote: proxy, xff: []string{"9.9.9.9", "10.0.0.5, 10.0.0.6"}, want: "9.9.9.9"},
		{name: "three lines, all trusted: leftmost", remote: proxy, xff: []string{"10.0.0.7", "10.0.0.5", "10.0.0.6"}, want: "10.0.0.7"},
		// Entry syntax.
		{name: "IPv4 with port", remote: proxy, xff: []string{"1.2.3.4:80"}, want: "1.2.3.4"},
		{name: "bracketed IPv6 with port", remote: proxy, xff: []string{"[2001:db8::1]:443"}, want: "2001:db8::1"},
		{name: "bracketed IPv6 without port", remote: proxy, xff: []string{"[2001:db8::1]"}, want: "2001:db8::1"},
		{name: "quoted IPv4", remote: proxy, xff: []string{`"1.2.3.4"`}, want: "1.2.3.4"},
		{name: "quoted bracketed IPv6 with port", remote: proxy, xff: []string{`"[2001:db8::2]:80"`}, want: "2001:db8::2"},
		{name: "spaces and tabs", remote: proxy, xff: []string{" \t1.2.3.4\t ,  10.0.0.2 "}, want: "1.2.3.4"},
		{name: "unknown selected", remote: proxy, xff: []string{"unknown"}, want: "10.1.2.3", fallback: true},
		{name: "unknown right of client", remote: proxy, xff: []string{"1.2.3.4, unknown"}, want: "10.1.2.3", fallback: true},
		{name: "unknown left of client", remote: proxy, xff: []string{"unknown, 1.2.3.4"}, want: "1.2.3.4"},
		{name: "empty item selected", remote: proxy, xff: []string{"1.2.3.4,,10.0.0.2"}, want: "10.1.2.3", fallback: true},
		{name: "trailing comma", remote: proxy, xff: []string{"1.2.3.4,"}, want: "10.1.2.3", fallback: true},
		{name: "leading empty item", remote: proxy, xff: []string{",1.2.3.4"}, want: "1.2.3.4"},
		{name: "empty header line", remote: proxy, xff: []string{""}, want: "10.1.2.3", fallback: true},
		{name: "empty last line", remote: proxy, xff: []string{"1.2.3.4", ""}, want: "10.1.2.3", fallback: true},
		{name: "garbage", remote: proxy, xff: []string{"not-an-ip"}, want: "10.1.2.3", fallback: true},
		{name: "five octets", remote: proxy, xff: []string{"1.2.3.4.5"}, want: "10.1.2.3", fallback: true},
		{name: "octet out of range", remote: proxy, xff: []string{"999.1.1.1"}, want: "10.1.2.3", fallback: true},
		{name: "bracketed IPv4", remote: proxy, xff: []string{"[1.2.3.4]"}, want: "10.1.2.3", fallback: true},
		{name: "port out of range", remote: proxy, xff: []string{"1.2.3.4:99999"}, want: "10.1.2.3", fallback: true},
		{name: "port with leading zeros", remote: proxy, xff: []string{"1.2.3.4:00080"}, want: "1.2.3.4"},
		{name: "quoted IPv4 with port, spaces outside the quotes", remote: proxy, xff: []string{` "1.2.3.4:80" , 10.0.0.2`}, want: "1.2.3.4"},
		{name: "signed port", remote: proxy, xff: []string{"1.2.3.4:+80"}, want: "10.1.2.3", fallback: true},
		{name: "space before the port", remote: proxy, xff: []string{"1.2.3.4 :80"}, want: "10.1.2.3", fallback: true},
		{name: "empty port", remote: proxy, xff: []string{"1.2.3.4:"}, want: "10.1.2.3", fallback: true},
		{name: "trusted hop with a port past 65535", remote: proxy, xff: []string{"1.2.3.4, 10.0.0.2:65536"}, want: "10.1.2.3", fallback: true},
		{name: "port 20 digits long (no overflow)", remote: proxy, xff: []string{"1.2.3.4:18446744073709551696"}, want: "10.1.2.3", fallback: true},
		{name: "obfuscated identifier", remote: proxy, xff: []string{"_hidden"}, want: "10.1.2.3", fallback: true},
		{name: "Forwarded syntax is not XFF", remote: proxy, xff: []string{"for=1.2.3.4"}, want: "10.1.2.3", fallback: true},
		{name: "IPv4 with zone", remote: proxy, xff: []string{"1.2.3.4%eth0"}, want: "10.1.2.3", fallback: true},
		{name: "garbage left of client is never read", remote: proxy, xff: []string{"\x00\xff{}", "1.2.3.4"}, want: "1.2.3.4"},
		// IPv4-mapped IPv6.
		{name: "mapped entry unmapped", remote: proxy, xff: []string{"::ffff:203.0.113.9"}, want: "203.0.113.9", prefix: "203.0.113.9/32"},
		{name: "mapped entry with brackets and port", remote: proxy, xff: []string{"[::ffff:203.0.113.9]:80"}, want: "203.0.113.9"},
		{name: "mapped untrusted peer", remote: "[::ffff:203.0.113.9]:5555", want: "203.0.113.9", prefix: "203.0.113.9/32"},
		{name: "mapped trusted peer", remote: "[::ffff:10.0.0.1]:5555", xff: []string{"1.2.3.4"}, want: "1.2.3.4"},
		{name: "mapped trusted prefix", remote: "192.168.1.1:80", xff: []string{"5.6.7.8"}, want: "5.6.7.8"},
		{name: "mapped trusted hop skipped", remote: proxy, xff: []string{"5.6.7.8, ::ffff:10.9.9.9"}, want: "5.6.7.8"},
		// Zones.
		{name: "zone in entry", remote: proxy, xff: []string{"fe80::1%eth0"}, want: "fe80::1"},
		{name: "zone in bracketed entry with port", remote: proxy, xff: []string{"[fe80::1%eth0]:80"}, want: "fe80::1"},
		{name: "zone in peer", remote: "[fe80::1%eth0]:1234", want: "fe80::1", prefix: "fe80::/64"},
		// IPv6 proxies and /64 grouping.
		{name: "IPv6 trusted proxy", remote: proxy6, xff: []string{"2001:db8:1::5"}, want: "2001:db8:1::5", prefix: "2001:db8:1::/64"},
		{name: "IPv6 trusted hop skipped", remote: proxy6, xff: []string{"2001:db8:1:2::5, 2001:db8:ffff::9"}, want: "2001:db8:1:2::5", prefix: "2001:db8:1:2::/64"},
		{name: "rotation inside a /64", remote: proxy6, xff: []string{"2001:db8:1:2:ffff:ffff:ffff:ffff"}, want: "2001:db8:1:2:ffff:ffff:ffff:ffff", prefix: "2001:db8:1:2::/64"},
		// Unparsable peers: never an empty key.
		{name: "unix socket peer", remote: "@", want: ""},
		{name: "unix socket peer ignores XFF", remote: "@", xff: []string{"1.2.3.4"}, want: ""},
		{name: "empty RemoteAddr", remote: "", want: ""},
	}
	if len(tests) < 40 {
		t.Fatalf("only %d cases", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRequest(tt.remote, tt.xff...)
			if tt.realIP != "" {
				r.Header.Set("X-Real-IP", tt.realIP)
			}
			id := e.Identify(r, time.Unix(0, 0))
			got := ""
			if id.IP.IsValid() {
				got = id.IP.String()
			}
			if got != tt.want || id.IPFallback != tt.fallback {
				t.Fatalf("remote %q xff %q: ip %q fallback %v, want %q fallback %v", tt.remote, tt.xff, got, id.IPFallback, tt.want, tt.fallback)
			}
			if ip, fb := e.ClientIP(r); ip != id.IP || fb != id.IPFallback {
				t.Fatalf("ClientIP = %v, %v; Identify said %v, %v", ip, fb, id.IP, id.IPFallback)
			}
			if id.IP.Zone() != "" || id.IP.Is4In6() {
				t.Fatalf("IP %v keeps a zone or a mapping", id.IP)
			}
			if tt.want == "" {
				if id.ClientKind != SourceRemoteAddr || id.Client != tt.remote {
					t.Fatalf("client = %s %q, want remote_addr %q", id.ClientKind, id.Client, tt.remote)
				}
			} else if id.ClientKind != SourceIP || id.Client != tt.want {
				t.Fatalf("client = %s %q, want ip %q", id.ClientKind, id.Client, tt.want)
			}
			if tt.prefix != "" {
				if p := e.IPPrefix(id.IP); p.String() != tt.prefix {
					t.Fatalf("IPPrefix = %v, want %s", p, tt.prefix)
				}
			}
		})
	}
}

func TestIPv6PrefixGrouping(t *testing.T) {
	key := func(bits int, remote string) string {
		e, err := NewExtractor(Config{Sources: []Source{SourceIP}, IPv6Prefix: bits})
		if err != nil {
			t.Fatal(err)
		}
		id := e.Identify(newTestRequest(remote), time.Time{})
		return string(e.AppendKey(nil, []Part{{Kind: PartClient}}, &id, &Values{Route: "r"}))
	}
	tests := []struct {
		bits int
		a, b string
		same bool
	}{
		{64, "[2001:db8:1:2::1]:1", "[2001:db8:1:2:ffff::9]:2", true},
		{64, "[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1", false},
		{48, "[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1", true},
		{48, "[2001:db8:1:2::1]:1", "[2001:db8:2:2::1]:1", false},
		{128, "[2001:db8:1:2::1]:1", "[2001:db8:1:2::2]:1", false},
		{64, "[fe80::1%eth0]:1", "[fe80::1%eth1]:1", true},
		// Mapped addresses are IPv4 clients, never collapsed into ::/64.
		{64, "[::ffff:1.2.3.4]:1", "[::ffff:1.2.3.5]:1", false},
		{64, "[::ffff:1.2.3.4]:1", "1.2.3.4:9", true},
		{64, "1.2.3.4:1", "1.2.3.5:1", false},
	}
	for _, tt := range tests {
		if got := key(tt.bits, tt.a) == key(tt.bits, tt.b); got != tt.same {
			t.Errorf("/%d: key(%s) == key(%s) is %v, want %v", tt.bits, tt.a, tt.b, got, tt.same)
		}
	}
}
