package keys

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestPeerTrusted(t *testing.T) {
	e, err := NewExtractor(Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"10.1.2.3:443", true},
		{"[::ffff:10.1.2.3]:443", true},
		{"[::1]:80", true},
		{"192.0.2.1:443", false},
		{"garbage", false},
		{"", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if got := e.PeerTrusted(r); got != tc.want {
			t.Errorf("PeerTrusted(%q) = %v, want %v", tc.remote, got, tc.want)
		}
	}
}

// TestPeerTrustedNone: with no trusted proxy no peer is trusted, whatever
// its address.
func TestPeerTrustedNone(t *testing.T) {
	e, err := NewExtractor(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"10.1.2.3:443", "[::1]:80", "127.0.0.1:1", "garbage", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if e.PeerTrusted(r) {
			t.Errorf("PeerTrusted(%q) with no trusted proxy = true", remote)
		}
	}
}

// BenchmarkPeerTrusted is the check the upstream request's Rewrite makes
// on every proxied request, without and with trusted proxies.
//
//	go test -run '^$' -bench PeerTrusted -benchmem -count 10 ./keys
func BenchmarkPeerTrusted(b *testing.B) {
	for _, c := range []struct {
		name    string
		trusted []netip.Prefix
	}{{"none", nil}, {"trusted", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}} {
		b.Run(c.name, func(b *testing.B) {
			e, err := NewExtractor(Config{TrustedProxies: c.trusted})
			if err != nil {
				b.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:40000"
			b.ReportAllocs()
			for b.Loop() {
				_ = e.PeerTrusted(r)
			}
		})
	}
}
