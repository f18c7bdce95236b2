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
