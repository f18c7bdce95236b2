package main

import (
	"testing"

	"github.com/tollgate/gateway/policy"
)

// TestSameListener: new certificate files are a reload; TLS on or off,
// client certificates asked or not, h2c and the stream limit are a
// restart.
func TestSameListener(t *testing.T) {
	base := policy.Server{Listen: "127.0.0.1:8443", HTTP2MaxConcurrentStreams: 100,
		TLS: &policy.TLS{Certificates: []policy.CertificateFiles{{Cert: "a.crt", Key: "a.key"}}, ClientCAFile: "ca.pem"}}
	with := func(f func(s *policy.Server)) policy.Server {
		s := base
		tls := *base.TLS
		s.TLS = &tls
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		s    policy.Server
		same bool
	}{
		{"identical", with(func(*policy.Server) {}), true},
		{"other certificate files", with(func(s *policy.Server) {
			s.TLS.Certificates = []policy.CertificateFiles{{Cert: "b.crt", Key: "b.key"}, {Cert: "c.crt", Key: "c.key"}}
		}), true},
		{"another client CA file", with(func(s *policy.Server) { s.TLS.ClientCAFile = "other.pem" }), true},
		{"TLS off", with(func(s *policy.Server) { s.TLS = nil }), false},
		{"no client CA", with(func(s *policy.Server) { s.TLS.ClientCAFile = "" }), false},
		{"client_auth optional", with(func(s *policy.Server) { s.TLS.ClientAuthOptional = true }), false},
		{"h2c", with(func(s *policy.Server) { s.H2C = true }), false},
		{"stream limit", with(func(s *policy.Server) { s.HTTP2MaxConcurrentStreams = 50 }), false},
		{"listen", with(func(s *policy.Server) { s.Listen = "127.0.0.1:9443" }), false},
	} {
		if got := sameListener(base, tc.s); got != tc.same {
			t.Errorf("%s: sameListener = %v, want %v", tc.name, got, tc.same)
		}
	}
}
