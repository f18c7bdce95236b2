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
