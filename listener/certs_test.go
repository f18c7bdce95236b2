package listener

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/testcerts"
	"github.com/tollgate/gateway/policy"
)

// tlsServer accepts TLS connections with c's config and, per connection,
// echoes one line back, so a test can keep a connection open across a
// reload.
func tlsServer(t *testing.T, c *Certs) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tl := tls.NewListener(ln, c.TLSConfig())
	go func() {
		for {
			conn, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 64)
				for {
					n, err := conn.Read(buf)
					if err != nil {
						return
					}
					if _, err := conn.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// served dials addr with SNI name and returns the serial of the leaf the
// server presented.
func served(t *testing.T, addr, name string, ca *testcerts.CA, client *tls.Certificate) (int64, *tls.Conn, error) {
	t.Helper()
	cfg := &tls.Config{ServerName: name, RootCAs: ca.Pool()}
	if client != nil {
		// Sent whatever CAs the server names (Go's client would otherwise
		// send none when its certificate is not of an acceptable CA).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return client, nil }
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return 0, nil, err
	}
	// TLS 1.3 reports a rejected client certificate only on the first read.
	if _, err := conn.Write([]byte("x")); err == nil {
		_, err = io.ReadFull(conn, make([]byte, 1))
		if err != nil {
			conn.Close()
			return 0, nil, err
		}
	}
	t.Cleanup(func() { conn.Close() })
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), conn, nil
}

func load(t *testing.T, cfg *policy.TLS) *Certs {
	t.Helper()
	c, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func write(t *testing.T, dir, name string, p testcerts.Pair) policy.CertificateFiles {
	t.Helper()
	c, k := p.Write(t, dir, name)
	return policy.CertificateFiles{Cert: c, Key: k}
}

// TestSNIChoosesCertificate: each name gets its own certificate, an
// unknown name (or none) the first.
func TestSNIChoosesCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	a := ca.Server(t, "a.example", "127.0.0.1")
	b := ca.Server(t, "b.example", "*.b.example")
	cfg := &policy.TLS{Certificates: []policy.CertificateFiles{write(t, dir, "a", a), write(t, dir, "b", b)}}
	c := load(t, cfg)
	addr := tlsServer(t, c)
	for _, tc := range []struct {
		sni  string
		want int64
	}{{"a.example", a.Serial}, {"b.example", b.Serial}, {"x.b.example", b.Serial}, {"127.0.0.1", a.Serial}} {
		got, _, err := served(t, addr, tc.sni, ca, nil)
		if err != nil {
			t.Fatalf("SNI %q: %v", tc.sni, err)
		}
		if got != tc.want {
			t.Errorf("SNI %q: served serial %d, want %d", tc.sni, got, tc.want)
		}
	}
}

// TestReloadKeepsConnections: a reload serves the new certificate to new
// handshakes while a connection opened before goes on; a bad certificate
// at reload keeps the old one and says why.
func TestReloadKeepsConnections(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	old := ca.Server(t, "gw.example")
	cfg := &policy.TLS{Certificates: []policy.CertificateFiles{write(t, dir, "gw", old)}}
	c := load(t, cfg)
	addr := tlsServer(t, c)
	_, conn, err := served(t, addr, "gw.example", ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh := ca.Server(t, "gw.example")
	write(t, dir, "gw", fresh)
	if err := c.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got, _, err := served(t, addr, "gw.example", ca, nil); err != nil || got != fresh.Serial {
		t.Fatalf("after reload: serial %d (%v), want %d", got, err, fresh.Serial)
	}
	if _, err := conn.Write([]byte("y")); err != nil {
		t.Fatalf("a connection from before the reload was dropped: %v", err)
	}
	if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
		t.Fatalf("a connection from before the reload was dropped: %v", err)
	}

	// A key that does not match the certificate: refused, old kept.
	other := ca.Server(t, "gw.example")
	if err := os.WriteFile(cfg.Certificates[0].Key, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	err = c.Reload(cfg)
	if err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Fatalf("reload with a mismatched key: err = %v, want a key mismatch", err)
	}
	if got, _, err := served(t, addr, "gw.example", ca, nil); err != nil || got != fresh.Serial {
		t.Fatalf("after a failed reload: serial %d (%v), want the previous %d", got, err, fresh.Serial)
	}
	if err := c.Reload(&policy.TLS{Certificates: []policy.CertificateFiles{{Cert: filepath.Join(dir, "none.crt"), Key: filepath.Join(dir, "none.key")}}}); err == nil {
		t.Fatal("reload with missing files succeeded")
	}
}

// TestWatchReloadsChangedFiles: a certificate renamed over the old file is
// served within a few polls, and a half-written pair (new certificate,
// old key) keeps the previous certificate until the key follows.
func TestWatchReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	first := ca.Server(t, "gw.example")
	cfg := &policy.TLS{Certificates: []policy.CertificateFiles{write(t, dir, "gw", first)}}
	c := load(t, cfg)
	addr := tlsServer(t, c)
	stop := c.Watch(10*time.Millisecond, slog.New(slog.DiscardHandler))
	defer stop()
	next := ca.Server(t, "gw.example")
	// The certificate alone: it does not match the key, nothing changes.
	if err := os.WriteFile(cfg.Certificates[0].Cert, next.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got, _, err := served(t, addr, "gw.example", ca, nil); err != nil || got != first.Serial {
		t.Fatalf("with a mismatched pair on disk: serial %d (%v), want the previous %d", got, err, first.Serial)
	}
	if err := os.WriteFile(cfg.Certificates[0].Key, next.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _, err := served(t, addr, "gw.example", ca, nil)
		if err == nil && got == next.Serial {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the changed pair was not served within 5s: serial %d (%v), want %d", got, err, next.Serial)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClientCertificates: with a client CA, "require" refuses a client
// without a certificate or with one of another CA; "optional" lets one
// without a certificate in and still refuses a foreign one.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "server CA")
	clients := testcerts.NewCA(t, "client CA")
	rogue := testcerts.NewCA(t, "rogue CA")
	srv := ca.Server(t, "gw.example")
	caFile := filepath.Join(dir, "clients.pem")
	if err := os.WriteFile(caFile, clients.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	good := clients.Client(t, "svc-a", "team").TLS(t)
	bad := rogue.Client(t, "svc-a", "team").TLS(t)
	for _, optional := range []bool{false, true} {
		cfg := &policy.TLS{Certificates: []policy.CertificateFiles{write(t, dir, "gw", srv)}, ClientCAFile: caFile, ClientAuthOptional: optional}
		addr := tlsServer(t, load(t, cfg))
		if _, _, err := served(t, addr, "gw.example", ca, &good); err != nil {
			t.Errorf("optional=%v: a client certificate of the client CA was refused: %v", optional, err)
		}
		if _, _, err := served(t, addr, "gw.example", ca, &bad); err == nil {
			t.Errorf("optional=%v: a client certificate of another CA was accepted", optional)
		}
		_, _, err := served(t, addr, "gw.example", ca, nil)
		if optional && err != nil {
			t.Errorf("optional: a client without a certificate was refused: %v", err)
		}
		if !optional && err == nil {
			t.Errorf("require: a client without a certificate was accepted")
		}
	}
}

// TestMinimumVersion: TLS 1.1 is refused.
func TestMinimumVersion(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	cfg := &policy.TLS{Certificates: []policy.CertificateFiles{write(t, dir, "gw", ca.Server(t, "gw.example"))}}
	addr := tlsServer(t, load(t, cfg))
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "gw.example", RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11})
	if err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}
