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

// TestDropTokens: every line of the token header that holds a token goes,
// whatever its place, the case of its scheme or the spaces around it;
// Authorization lines of another scheme stay; a header other than
// Authorization goes whole (any value is a token there).
func TestDropTokens(t *testing.T) {
	auth, err := NewExtractor(Config{JWT: &JWTConfig{HS256Secret: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewExtractor(Config{JWT: &JWTConfig{Header: "x-token", HS256Secret: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := NewExtractor(Config{})
	for _, tc := range []struct {
		name string
		e    *Extractor
		in   http.Header
		want []string // the token header's values after
		key  string
	}{
		{"one bearer", auth, http.Header{"Authorization": {"Bearer a.b.c"}}, nil, "Authorization"},
		{"basic kept", auth, http.Header{"Authorization": {"Basic eDp5"}}, []string{"Basic eDp5"}, "Authorization"},
		{"bearer behind basic", auth, http.Header{"Authorization": {"Basic eDp5", "Bearer a.b.c"}}, []string{"Basic eDp5"}, "Authorization"},
		{"lower-case scheme, spaces", auth, http.Header{"Authorization": {"Basic eDp5", "  bearer   a.b.c "}}, []string{"Basic eDp5"}, "Authorization"},
		{"two bearers", auth, http.Header{"Authorization": {"BEARER x", "Bearer y"}}, nil, "Authorization"},
		{"scheme alone is no token", auth, http.Header{"Authorization": {"Bearer"}}, []string{"Bearer"}, "Authorization"},
		{"other header, bare tokens", other, http.Header{"X-Token": {"a.b.c", "d"}}, nil, "X-Token"},
		{"other header leaves Authorization", other, http.Header{"Authorization": {"Bearer a.b.c"}}, []string{"Bearer a.b.c"}, "Authorization"},
		{"no jwt", plain, http.Header{"Authorization": {"Bearer a.b.c"}}, []string{"Bearer a.b.c"}, "Authorization"},
	} {
		tc.e.DropTokens(tc.in)
		got, ok := tc.in[tc.key]
		if len(got) != len(tc.want) || (tc.want == nil && ok) {
			t.Errorf("%s: %q left, want %q", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %q left, want %q", tc.name, got, tc.want)
			}
		}
	}
}
