package keys

import (
	"net/http"
	"net/netip"
	"testing"
)

// TestExtractorSettings: the accessors report the compiled values, and the
// trusted peer is one whose forwarded headers the Extractor believes.
func TestExtractorSettings(t *testing.T) {
	e, err := NewExtractor(Config{APIKeyHeader: "x-key", UserHeader: "x-user", IPv6Prefix: 48,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:10.1.2.3/120"), netip.MustParsePrefix("192.0.2.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	if e.APIKeyHeader() != "X-Key" || e.UserHeader() != "X-User" || e.IPv6Prefix() != 48 {
		t.Errorf("settings %q %q %d, want X-Key X-User 48", e.APIKeyHeader(), e.UserHeader(), e.IPv6Prefix())
	}
	a, ok := e.TrustedPeer()
	if !ok || a != netip.MustParseAddr("10.1.2.0") {
		t.Fatalf("trusted peer %v %v, want 10.1.2.0 (the mapped prefix unmapped)", a, ok)
	}
	r := &http.Request{RemoteAddr: netip.AddrPortFrom(a, 0).String(), Header: http.Header{}}
	if !e.PeerTrusted(r) {
		t.Errorf("the trusted peer %v is not trusted", a)
	}

	d, _ := NewExtractor(Config{})
	if _, ok := d.TrustedPeer(); ok || d.APIKeyHeader() != "X-Api-Key" || d.UserHeader() != "" || d.IPv6Prefix() != 64 {
		t.Errorf("defaults: %v %q %q %d", ok, d.APIKeyHeader(), d.UserHeader(), d.IPv6Prefix())
	}
}
