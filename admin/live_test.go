package admin

import (
	"net/http/httptest"
	"testing"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// liveRequests serves p from a fresh memory store and returns the store
// and send, which passes one request through the gateway to path /x:
// method from remote (host:port), with X-API-Key and X-Tenant when not
// empty. An answer other than 200 fails t.
func liveRequests(t *testing.T, p *policy.Policy) (*memstore.Store, func(method, remote, apiKey, tenant string)) {
	t.Helper()
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	h, err := proxy.New(p, proxy.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return store, func(method, remote, apiKey, tenant string) {
		t.Helper()
		r := httptest.NewRequest(method, "/x", nil)
		r.RemoteAddr = remote
		if apiKey != "" {
			r.Header.Set("X-API-Key", apiKey)
		}
		if tenant != "" {
			r.Header.Set("X-Tenant", tenant)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("live request: %d %s", w.Code, w.Body)
		}
	}
}
