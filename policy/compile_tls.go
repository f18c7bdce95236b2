package policy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/tollgate/gateway/policy/config"
)

// buildTLS checks the shape of a tls table (server.tls, rls.tls: prefix); the files are read by
// checkTLSFiles, at Compile.
func buildTLS(c *config.TLSConfig, prefix string, e *problems) *TLS {
	t := &TLS{ClientCAFile: c.ClientCAFile}
	if c.CertFile != "" || c.KeyFile != "" {
		if c.CertFile == "" {
			e.add(prefix+".cert_file", "is required with key_file")
		}
		if c.KeyFile == "" {
			e.add(prefix+".key_file", "is required with cert_file")
		}
		t.Certificates = append(t.Certificates, CertificateFiles{Cert: c.CertFile, Key: c.KeyFile})
	}
	for i, cc := range c.Certificates {
		path := fmt.Sprintf(prefix+".certificates[%d]", i)
		if cc.CertFile == "" {
			e.add(path+".cert_file", "is required")
		}
		if cc.KeyFile == "" {
			e.add(path+".key_file", "is required")
		}
		t.Certificates = append(t.Certificates, CertificateFiles{Cert: cc.CertFile, Key: cc.KeyFile})
	}
	if len(t.Certificates) == 0 {
		e.add(prefix, "set cert_file and key_file (or certificates) to serve TLS")
	}
	switch c.ClientAuth {
	case "", "require":
	case "optional":
		t.ClientAuthOptional = true
	default:
		e.add(prefix+".client_auth", "unknown value %q (want require or optional)", c.ClientAuth)
	}
	if c.ClientAuth != "" && c.ClientCAFile == "" {
		e.add(prefix+".client_auth", "set, but client_ca_file is empty, so no client certificate could be verified")
	}
	return t
}

// checkTLSFiles reads every certificate, key and CA file of t and reports
// what does not load, with its field path, so that `validate` and a
// reload name a bad file before the listener would.
func checkTLSFiles(c *config.TLSConfig, t *TLS, prefix string, readFile func(string) ([]byte, error), e *problems) {
	first := 0 // how many pairs come from cert_file/key_file
	if c.CertFile != "" || c.KeyFile != "" {
		first = 1
	}
	for i, cf := range t.Certificates {
		path := prefix + ".cert_file"
		if i >= first {
			path = fmt.Sprintf(prefix+".certificates[%d]", i-first)
		}
		if _, err := cf.Load(readFile); err != nil {
			e.add(path, "%v", err)
		}
	}
	if t.ClientCAFile != "" {
		if _, err := t.LoadClientCAs(readFile); err != nil {
			e.add(prefix+".client_ca_file", "%v", err)
		}
	}
}

// checkMTLS reports every use of the mtls identity where no client
// certificate can be verified: it would never yield, and a limit by it
// would count every client as one.
func checkMTLS(c *config.Config, s Server, e *problems) {
	if s.TLS != nil && s.TLS.ClientCAFile != "" {
		return
	}
	for i, src := range c.Identity.Sources {
		if src == "mtls" {
			e.add(fmt.Sprintf("identity.sources[%d]", i), "mtls needs server.tls.client_ca_file (no client certificate is verified without it)")
		}
	}
	for i, l := range c.Limits {
		for j, b := range l.By {
			if b == "mtls" {
				e.add(fmt.Sprintf("limits[%d].by[%d]", i, j), "mtls needs server.tls.client_ca_file (no client certificate is verified without it)")
			}
		}
	}
}

// Load reads and parses the certificate/key pair f names: the chain must
// parse and its leaf must match the key. Compile checks the files with it,
// and the listener loads them with it (at startup and on every reload).
func (f CertificateFiles) Load(readFile func(string) ([]byte, error)) (tls.Certificate, error) {
	certPEM, err := readFile(f.Cert)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readFile(f.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s with %s: %w", f.Cert, f.Key, err)
	}
	return c, nil
}

// LoadClientCAs reads the PEM bundle of CA certificates t.ClientCAFile
// names (Compile checks it, the listener loads it with this).
func (t *TLS) LoadClientCAs(readFile func(string) ([]byte, error)) (*x509.CertPool, error) {
	file := t.ClientCAFile
	b, err := readFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return pool, nil
}
