package proxy_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
	upstreams "github.com/tollgate/gateway/upstream"
)

// fixedResolver answers every name with 127.0.0.1.
type fixedResolver struct{}

func (fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// An https target named by a DNS name is dialled at the address the name
// resolved to, and still spoken to as the name: the TLS server name (SNI,
// and the name the certificate is verified against) and the Host header
// are the configured name, not the address. Without the name's own
// transport the hello carried no server name (Go sends none for an
// address), so a server choosing its certificate by SNI, or a
// certificate valid only for the name, failed the exchange.
func TestResolvedHTTPSTargetKeepsItsName(t *testing.T) {
	var mu sync.Mutex
	var snis, hosts []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
	}))
	srv.TLS = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		snis = append(snis, h.ServerName)
		mu.Unlock()
		return nil, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	named := "https://example.com:" + port // in the test certificate's names

	p := compile(t, func(cfg *config.Config) {
		rt := balanced(named)
		rt.Retries = 1 // more than one URL: the targets are resolved and balanced
		cfg.Routes = []config.RouteConfig{rt}
	})
	tr := proxy.NewTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	reg := upstreams.NewRegistry(upstreams.Options{Resolver: fixedResolver{}})
	t.Cleanup(reg.Close)
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Transport: tr, Upstreams: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Pools()[0].Targets()[0].URL.Host; got != "127.0.0.1:"+port {
		t.Fatalf("the name resolved to %s, want 127.0.0.1:%s", got, port)
	}
	gw := gateway(t, h)
	for range 3 {
		if status, body := do(t, "GET", gw.URL+"/x", nil, 0); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	u, _ := url.Parse(named)
	for _, s := range snis {
		if s != "example.com" {
			t.Errorf("TLS hello named %q, want example.com", s)
		}
	}
	for _, h := range hosts {
		if h != u.Host {
			t.Errorf("Host %q, want %q", h, u.Host)
		}
	}
	if len(snis) == 0 || len(hosts) != 3 {
		t.Fatalf("%d handshakes, %d requests", len(snis), len(hosts))
	}
}
