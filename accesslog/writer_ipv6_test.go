package accesslog

import (
	"bytes"
	"testing"
)

// TestHashIPv6Prefix: with IPv6Prefix set, a hashed log hashes an IPv6
// client as the prefix the gateway counts it by, so that addresses of one
// prefix replay as one client — and nothing else is merged: not IPv4, not
// an API key or user that reads like an address, not a raw log.
func TestHashIPv6Prefix(t *testing.T) {
	salt := []byte("s")
	hashOf := func(o Options, e Entry) (client, ip string) {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, o)
		e.Method, e.Status, e.Time = "GET", 200, t0
		w.Log(&e)
		w.Close()
		p := NewParser(&buf, Auto)
		if !p.Next() {
			t.Fatalf("no line: %v", p.Malformed())
		}
		return p.Entry().Client, p.Entry().IP
	}
	ipEntry := func(a string) Entry { return Entry{Client: a, ClientKind: "ip", IP: a} }
	o64 := Options{Salt: salt, IPv6Prefix: 64}
	tests := []struct {
		name string
		o    Options
		a, b Entry
		same bool
	}{
		{"one /64", o64, ipEntry("2001:db8:1:2::1"), ipEntry("2001:db8:1:2:ffff:1:2:3"), true},
		{"one /64, jsonl", Options{Format: JSONL, Salt: salt, IPv6Prefix: 64}, ipEntry("2001:db8:1:2::1"), ipEntry("2001:db8:1:2::9"), true},
		{"neighbouring /64s", o64, ipEntry("2001:db8:1:2::1"), ipEntry("2001:db8:1:3::1"), false},
		{"one /48 at 48", Options{Salt: salt, IPv6Prefix: 48}, ipEntry("2001:db8:1:2::1"), ipEntry("2001:db8:1:3::1"), true},
		{"IPv4 per address", o64, ipEntry("192.0.2.1"), ipEntry("192.0.2.2"), false},
		{"IPv4-mapped per address", o64, ipEntry("::ffff:192.0.2.1"), ipEntry("::ffff:192.0.2.2"), false},
		{"API keys that read like one /64", o64,
			Entry{Client: "2001:db8::1", ClientKind: "api_key"}, Entry{Client: "2001:db8::2", ClientKind: "api_key"}, false},
		{"users that read like one /64", o64,
			Entry{Client: "2001:db8::1", ClientKind: "user"}, Entry{Client: "2001:db8::2", ClientKind: "user"}, false},
		{"not an address", o64, ipEntry("2001:db8::zz"), ipEntry("2001:db8::zy"), false},
		{"prefix unset: per address", Options{Salt: salt}, ipEntry("2001:db8:1:2::1"), ipEntry("2001:db8:1:2::2"), false},
		{"raw log keeps the address", Options{Salt: salt, RawClient: true, IPv6Prefix: 64}, ipEntry("2001:db8:1:2::1"), ipEntry("2001:db8:1:2::2"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ca, ia := hashOf(tc.o, tc.a)
			cb, ib := hashOf(tc.o, tc.b)
			if (ca == cb) != tc.same || (tc.a.IP != "" && (ia == ib) != tc.same) {
				t.Errorf("clients %q %q, IPs %q %q: same = %v, want %v", ca, cb, ia, ib, ca == cb, tc.same)
			}
		})
	}
	// IPv4 hashes as it always did: logs written before stay comparable.
	if c, _ := hashOf(o64, ipEntry("192.0.2.1")); c != Hash(salt, "ip", "192.0.2.1") {
		t.Errorf("IPv4 client hash %q changed", c)
	}
}
