// Package testcerts makes certificate authorities and certificates for
// tests, in memory, with crypto/x509: no private key is ever committed.
// The keys are ECDSA P-256, generated per call.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// serial numbers every certificate of the process differently, so a test
// can tell which of two certificates a handshake was served.
var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM encoded.
	PEM []byte
}

// Pair is an issued certificate with its key, PEM encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
	// Serial is the certificate's serial number.
	Serial int64
}

// NewCA returns a self-signed CA named cn, valid from an hour ago for a
// day. Failures fail t.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	ca, err := newCA(cn)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return ca
}

func newCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Tollgate tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Server issues a server certificate for names (DNS names or IP
// addresses).
func (ca *CA) Server(t testing.TB, names ...string) Pair {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: names[0]}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return ca.must(t, tmpl)
}

// Client issues a client certificate with the subject CN=cn, O=org.
func (ca *CA) Client(t testing.TB, cn, org string) Pair {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: []string{org}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return ca.must(t, tmpl)
}

func (ca *CA) must(t testing.TB, tmpl *x509.Certificate) Pair {
	t.Helper()
	p, err := ca.issue(tmpl)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return p
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	n := serial.Add(1)
	tmpl.SerialNumber = big.NewInt(n)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Serial:  n,
	}, nil
}

// TLS returns the pair as a tls.Certificate (for a client).
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return c
}

// Write writes the pair to dir/name.crt and dir/name.key, each by a
// rename over the old file (as a deployment tool would), and returns the
// two paths.
func (p Pair) Write(t testing.TB, dir, name string) (cert, key string) {
	t.Helper()
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writeAtomic(key, p.KeyPEM); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	if err := writeAtomic(cert, p.CertPEM); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return cert, key
}

// Pool returns a pool holding the CA, for a client that verifies servers.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
