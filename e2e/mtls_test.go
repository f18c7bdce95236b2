package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/gateway/internal/testcerts"
)

// TestMTLSIdentityHostile: the subject of a verified client certificate
// is the client (identity source "mtls") and a key part; nothing a client
// sends without the CA's signature can take it over. Each row is a
// request that tries to dodge the per-certificate limit or to spend
// another client's budget.
func TestMTLSIdentityHostile(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			clients := testcerts.NewCA(t, "client CA")
			rogue := testcerts.NewCA(t, "rogue CA")
			caFile := writeFile(t, dir, "clients.pem", clients.PEM)
			body := `
[[limits]]
name = "per-client"
rates = ["2/minute"]

[[limits]]
name = "per-cert"
rates = ["2/minute"]
by = ["mtls"]
on_missing = "reject"

[[routes]]
name = "any"
path_prefix = "/any"
respond = { body = "ok" }
limits = ["per-client"]

[[routes]]
name = "certs-only"
path_prefix = "/certs-only"
respond = { body = "ok" }
limits = ["per-cert"]
`
			redisAddr := ""
			if store == "redis" {
				redisAddr = startRedisAddr(t)
			}
			pr := protocols[2]
			data, ca, _, _ := frontData(t, pr, dir, redisAddr,
				fmt.Sprintf(", client_ca_file = %q, client_auth = \"optional\"", caFile), body)
			data["Sources"] = `["mtls", "api_key", "ip"]`
			f := &front{gw: startGateway(t, "front.toml.tmpl", gwOpts{Data: data}), proto: pr, ca: ca}

			svcA := clients.Client(t, "svc-a", "team").TLS(t)
			svcB := clients.Client(t, "svc-b", "team").TLS(t)
			forgedA := rogue.Client(t, "svc-a", "team").TLS(t)
			client := func(c *tls.Certificate) *http.Client { return protoClient(t, pr, ca, c) }
			a, b, anon := client(&svcA), client(&svcB), client(nil)

			seq := func(what string, c *http.Client, path string, hdr map[string]string, want ...int) {
				t.Helper()
				for i, w := range want {
					r := do(t, c, "GET", f.url(path), hdr)
					if r.Status != w {
						t.Fatalf("%s: request %d: %s, want %d", what, i+1, r, w)
					}
				}
			}
			seq("svc-a uses its budget", a, "/any", nil, 200, 200, 429)
			seq("svc-a with a fresh API key is still svc-a", a, "/any", map[string]string{"X-API-Key": "fresh"}, 429)
			seq("svc-b has its own budget", b, "/any", nil, 200, 200, 429)
			// Headers a TLS-terminating proxy would set are not believed:
			// without a certificate the client is its API key.
			spoof := map[string]string{"X-SSL-Client-S-DN": "CN=svc-a,O=team", "X-Client-Cert": "CN=svc-a", "X-API-Key": "k1"}
			seq("a client without a certificate claiming svc-a in headers", anon, "/any", spoof, 200, 200, 429)
			seq("a by-certificate limit without a certificate", anon, "/certs-only", spoof, 401)
			seq("by-certificate: svc-a", a, "/certs-only", nil, 200, 200, 429)
			seq("by-certificate: svc-b", b, "/certs-only", nil, 200, 200, 429)

			// The same subject signed by another CA never gets through the
			// handshake.
			if _, err := client(&forgedA).Get(f.url("/any")); err == nil {
				t.Errorf("a certificate of another CA with svc-a's subject was accepted")
			}
		})
	}
}

// TestMTLSRequired: with client_auth "require" (the default once a client
// CA is set) a client without a certificate gets no connection.
func TestMTLSRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clients := testcerts.NewCA(t, "client CA")
	caFile := writeFile(t, dir, "clients.pem", clients.PEM)
	pr := protocols[2]
	data, ca, _, _ := frontData(t, pr, dir, "", fmt.Sprintf(", client_ca_file = %q", caFile),
		"[[routes]]\nname = \"r\"\npath_prefix = \"/\"\nrespond = { body = \"ok\" }\n")
	f := &front{gw: startGateway(t, "front.toml.tmpl", gwOpts{Data: data}), proto: pr, ca: ca}
	if _, err := protoClient(t, pr, ca, nil).Get(f.url("/")); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	c := clients.Client(t, "svc", "team").TLS(t)
	if r := do(t, protoClient(t, pr, ca, &c), "GET", f.url("/"), nil); r.Status != 200 {
		t.Fatalf("a client with a certificate: %s", r)
	}
}
