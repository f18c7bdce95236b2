package policy

import (
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/testcerts"
	"github.com/tollgate/gateway/policy/config"
)

// TestCompileTLSFiles: Compile reads every TLS file and names the one that
// does not load by its field path; good files compile.
func TestCompileTLSFiles(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	good := ca.Server(t, "gw.example")
	other := ca.Server(t, "gw.example")
	files := map[string][]byte{
		"good.crt": good.CertPEM, "good.key": good.KeyPEM,
		"other.key": other.KeyPEM, "ca.pem": ca.PEM, "junk.pem": []byte("not PEM"),
	}
	readFile := func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return b, nil
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	for _, tc := range []struct {
		name string
		tls  config.TLSConfig
		want string // "" compiles
	}{
		{"good", config.TLSConfig{CertFile: "good.crt", KeyFile: "good.key", ClientCAFile: "ca.pem"}, ""},
		{"key of another certificate", config.TLSConfig{CertFile: "good.crt", KeyFile: "other.key"}, "server.tls.cert_file: good.crt with other.key: tls: private key does not match public key"},
		{"missing file", config.TLSConfig{CertFile: "good.crt", KeyFile: "good.key", Certificates: []config.CertificateConfig{{CertFile: "gone.crt", KeyFile: "good.key"}}},
			"server.tls.certificates[0]: open gone.crt: file does not exist"},
		{"CA bundle without PEM", config.TLSConfig{CertFile: "good.crt", KeyFile: "good.key", ClientCAFile: "junk.pem"}, "server.tls.client_ca_file: junk.pem: no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.Server.TLS = tc.tls
			p, err := Compile(c, func(string) string { return "" }, readFile)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if len(p.Server.TLS.Certificates) != 1+len(tc.tls.Certificates) {
					t.Errorf("compiled %d certificates", len(p.Server.TLS.Certificates))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSameListener: new certificate files are a reload; TLS on or off,
// client certificates asked or not, h2c and the stream limit are a
// restart.
func TestSameListener(t *testing.T) {
	base := Server{Listen: "127.0.0.1:8443", HTTP2MaxConcurrentStreams: 100,
		TLS: &TLS{Certificates: []CertificateFiles{{Cert: "a.crt", Key: "a.key"}}, ClientCAFile: "ca.pem"}}
	with := func(f func(s *Server)) Server {
		s := base
		tls := *base.TLS
		s.TLS = &tls
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		s    Server
		same bool
	}{
		{"identical", with(func(*Server) {}), true},
		{"other certificate files", with(func(s *Server) {
			s.TLS.Certificates = []CertificateFiles{{Cert: "b.crt", Key: "b.key"}, {Cert: "c.crt", Key: "c.key"}}
		}), true},
		{"another client CA file", with(func(s *Server) { s.TLS.ClientCAFile = "other.pem" }), true},
		{"TLS off", with(func(s *Server) { s.TLS = nil }), false},
		{"no client CA", with(func(s *Server) { s.TLS.ClientCAFile = "" }), false},
		{"client_auth optional", with(func(s *Server) { s.TLS.ClientAuthOptional = true }), false},
		{"h2c", with(func(s *Server) { s.H2C = true }), false},
		{"stream limit", with(func(s *Server) { s.HTTP2MaxConcurrentStreams = 50 }), false},
		{"listen", with(func(s *Server) { s.Listen = "127.0.0.1:9443" }), false},
	} {
		if got := SameListener(base, tc.s); got != tc.same {
			t.Errorf("%s: SameListener = %v, want %v", tc.name, got, tc.same)
		}
	}
}
