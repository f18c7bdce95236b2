package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/internal/testcerts"
)

// protocol is one way a client reaches the gateway's public listener.
type protocol struct {
	name string
	// proto is the Proto every response must report.
	proto string
	// tls serves the listener over TLS with a certificate of the test's
	// CA; h2c serves cleartext HTTP/2 beside HTTP/1.1.
	tls, h2c bool
}

// protocols are the three listeners every core limiting case runs on.
var protocols = []protocol{
	{name: "http1", proto: "HTTP/1.1"},
	{name: "h2c", proto: "HTTP/2.0", h2c: true},
	{name: "h2-tls", proto: "HTTP/2.0", tls: true},
}

// front is a gateway started on one protocol, with what a client needs to
// reach it.
type front struct {
	*gw
	proto protocol
	ca    *testcerts.CA
	// certFile and keyFile are the served pair (TLS only).
	certFile, keyFile string
}

// frontData fills front.toml.tmpl: the listener lines for pr (writing a
// fresh server certificate for 127.0.0.1 into dir), the store (Redis at
// redisAddr, memory when ""), the identity sources and the body.
func frontData(t testing.TB, pr protocol, dir, redisAddr, extraTLS, body string) (map[string]any, *testcerts.CA, string, string) {
	t.Helper()
	var fr string
	var ca *testcerts.CA
	var cert, key string
	switch {
	case pr.tls:
		ca = testcerts.NewCA(t, "tollgate e2e CA")
		cert, key = ca.Server(t, "127.0.0.1", "localhost").Write(t, dir, "server")
		fr = fmt.Sprintf("tls = { cert_file = %q, key_file = %q%s }", cert, key, extraTLS)
	case pr.h2c:
		fr = "h2c = true"
	}
	return map[string]any{"Front": fr, "Redis": redisAddr, "Prefix": fmt.Sprintf("tollgate:%d:", time.Now().UnixNano()),
		"Sources": `["api_key", "ip"]`, "Body": body}, ca, cert, key
}

// startFront starts a gateway on pr with body as its limits and routes,
// on Redis when redis is set.
func startFront(t testing.TB, pr protocol, redis bool, body string) *front {
	t.Helper()
	addr := ""
	if redis {
		addr = startRedisAddr(t)
	}
	data, ca, cert, key := frontData(t, pr, t.TempDir(), addr, "", body)
	g := startGateway(t, "front.toml.tmpl", gwOpts{Data: data})
	return &front{gw: g, proto: pr, ca: ca, certFile: cert, keyFile: key}
}

// url is the public URL of path on f's protocol.
func (f *front) url(path string) string {
	if f.proto.tls {
		return "https://" + f.Listen + path
	}
	return "http://" + f.Listen + path
}

// client returns a client that speaks only f's protocol, so every
// response it reads came over it.
func (f *front) client(t testing.TB) *http.Client {
	t.Helper()
	return protoClient(t, f.proto, f.ca, nil)
}

// protoClient returns a client speaking only pr (trusting ca over TLS,
// presenting cert when non-nil).
func protoClient(t testing.TB, pr protocol, ca *testcerts.CA, cert *tls.Certificate) *http.Client {
	t.Helper()
	var p http.Protocols
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true,
		Protocols:           &p,
	}
	switch {
	case pr.tls:
		p.SetHTTP2(true)
		tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
		if cert != nil {
			tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		}
	case pr.h2c:
		p.SetUnencryptedHTTP2(true)
	default:
		p.SetHTTP1(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// checkProto fails unless a request over c comes back on pr's protocol.
func checkProto(t testing.TB, c *http.Client, url string, pr protocol) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("%s: GET %s: %v", pr.name, url, err)
	}
	resp.Body.Close()
	if resp.Proto != pr.proto {
		t.Fatalf("%s: response over %s, want %s", pr.name, resp.Proto, pr.proto)
	}
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// needCurlHTTP2 fails the test, saying how to get one, unless curl with
// HTTP/2 support is installed.
func needCurlHTTP2(t testing.TB) {
	t.Helper()
	out, err := exec.Command("curl", "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "HTTP2") {
		t.Fatalf("curl with HTTP/2 is needed (apt-get install curl; `curl --version` must list HTTP2): %v %s", err, out)
	}
}

// startRedisAddr starts a standalone redis-server for the test and returns
// its address.
func startRedisAddr(t testing.TB) string {
	t.Helper()
	return redistest.Standalone(t).Addr
}
