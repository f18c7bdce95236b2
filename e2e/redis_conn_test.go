package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// The ways a gateway reaches Redis besides a plain redis:// URL, each
// through the binary against real redis-server processes: a Sentinel
// group, an ACL user with a password from the environment, and TLS. Each
// test proves decisions are made in Redis (exactly 3 of 5 admitted, and the
// counter key is in the server), not merely that the gateway starts.

// connData is the template data of redis_conn.toml.tmpl.
func connData(conn string) map[string]any {
	return map[string]any{"Conn": conn, "StoreExtra": ""}
}

// checkDecidesIn sends 5 requests of one client against the 3/hour limit:
// exactly 3 are admitted, and the counter is in the Redis at addr.
func checkDecidesIn(t *testing.T, g *gw, do func(args ...string) (any, error), client string) {
	t.Helper()
	c := newClient(t, "")
	got := countStatuses(5, func(int) *response { return get(t, c, g.url("/x"), map[string]string{"X-API-Key": client}) })
	if !got.exactly(3, 2) {
		t.Errorf("5 requests on a 3/hour limit: %s, want 3×200 and 2×429", got)
	}
	v, err := do("KEYS", "tg-conn:*")
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	if l, _ := v.([]any); len(l) == 0 {
		t.Errorf("no counter under tg-conn: in Redis; the decisions were not made there")
	}
}

// startConnGateway renders redis_conn.toml.tmpl with data and env and
// starts the gateway; require_at_startup makes a connection that cannot
// decide fail the start instead of degrading.
func startConnGateway(t *testing.T, data map[string]any, env ...string) *gw {
	t.Helper()
	data["StoreExtra"] = "require_at_startup = true"
	return startGateway(t, "redis_conn.toml.tmpl", gwOpts{Data: data, Env: env})
}

// TestRedisSentinelThroughBinary: store.redis.sentinel finds the master
// through three sentinels, and the gateway counts there.
func TestRedisSentinelThroughBinary(t *testing.T) {
	t.Parallel()
	g := redistest.Sentinel(t)
	master, err := g.MasterAddr()
	if err != nil {
		t.Fatal(err)
	}
	addrs := `"` + strings.Join(g.SentinelAddrs(), `", "`) + `"`
	gw := startConnGateway(t, connData(fmt.Sprintf("sentinel = { master = %q, addrs = [%s] }", g.Name, addrs)))
	checkDecidesIn(t, gw, func(args ...string) (any, error) { return redistest.Do(master, args...) }, "sentinel")
}

// TestRedisACLUserThroughBinary: store.redis.username with the password in
// the variable password_env names is how the gateway logs in; with a wrong
// password it does not start (require_at_startup), naming the refusal.
func TestRedisACLUserThroughBinary(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	if _, err := rs.Do("ACL", "SETUSER", "tg", "on", ">s3cret-pw", "~tg-conn:*", "+@all"); err != nil {
		t.Fatal(err)
	}
	conn := fmt.Sprintf("url = \"redis://%s/0\"\nusername = \"tg\"\npassword_env = \"TG_REDIS_PW\"", rs.Addr)
	g := startConnGateway(t, connData(conn), "TG_REDIS_PW=s3cret-pw")
	checkDecidesIn(t, g, rs.Do, "acl")
	// The user really is the one logged in: Redis lists its connections.
	v, err := rs.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(v), "user=tg ") {
		t.Errorf("no connection of user tg in CLIENT LIST:\n%s", v)
	}

	data := connData(conn)
	data["StoreExtra"] = "require_at_startup = true"
	data["Listen"], data["Admin"] = listenAndAdmin(t)
	path := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(path, renderTemplate(t, "redis_conn.toml.tmpl", data), 0o600); err != nil {
		t.Fatal(err)
	}
	const wrong = "wr0ng-pw-9431"
	code, stdout, stderr := runGateway(t, []string{"TG_REDIS_PW=" + wrong}, "--config", path)
	if out := stdout + stderr; code != 1 || !strings.Contains(out, "WRONGPASS") {
		t.Errorf("wrong password: exit %d, want 1 naming WRONGPASS; output:\n%s", code, out)
	}
	if strings.Contains(stdout+stderr, wrong) {
		t.Errorf("the password appears in the output:\n%s", stdout+stderr)
	}
}

// TestRedisTLSThroughBinary: a rediss:// URL speaks TLS to a redis-server
// with tls-port, verifying its certificate against a CA the test made (the
// gateway trusts the system roots; SSL_CERT_FILE points them at the CA).
// A certificate from an unknown CA is refused.
func TestRedisTLSThroughBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	tlsAddr := freePort(t)
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	rs := redistest.StandaloneConfig(t, fmt.Sprintf("tls-port %s\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients no\n",
		tlsPort, certFile, keyFile, caFile))
	conn := fmt.Sprintf("url = \"rediss://%s/0\"", tlsAddr)
	g := startConnGateway(t, connData(conn), "SSL_CERT_FILE="+caFile)
	checkDecidesIn(t, g, rs.Do, "tls")

	// Without the CA the server's certificate is unknown: no start.
	otherCA, _, _ := writeTestPKI(t, t.TempDir())
	data := connData(conn)
	data["StoreExtra"] = "require_at_startup = true"
	data["Listen"], data["Admin"] = listenAndAdmin(t)
	path := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(path, renderTemplate(t, "redis_conn.toml.tmpl", data), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runGateway(t, []string{"SSL_CERT_FILE=" + otherCA}, "--config", path)
	if out := stdout + stderr; code != 1 || !strings.Contains(out, "certificate") {
		t.Errorf("untrusted certificate: exit %d, want 1 naming the certificate; output:\n%s", code, out)
	}
}

// writeTestPKI writes a fresh CA and a server certificate for 127.0.0.1
// signed by it, and returns the three PEM files' paths.
func writeTestPKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}
