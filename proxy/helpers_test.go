package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// upstream is a real HTTP server that records what it received.
type upstream struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	headers http.Header
	path    string
}

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.headers = r.Header.Clone()
		u.path = r.URL.Path
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprint(w, "upstream ok")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last() (http.Header, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers, u.path
}

// compile builds a policy from cfg with every default applied.
func compile(t *testing.T, mutate func(c *config.Config)) *policy.Policy {
	t.Helper()
	return policytest.Compile(t, mutate)
}

func limit(name, algorithm string, rates ...string) config.LimitConfig {
	l := config.DefaultLimit()
	l.Name, l.Algorithm, l.Rates = name, algorithm, rates
	return l
}

func route(name, prefix, upstreamURL string, limits ...string) config.RouteConfig {
	r := config.DefaultRoute()
	r.Name, r.PathPrefix, r.Upstream, r.Limits = name, prefix, upstreamURL, limits
	return r
}

// gateway serves h over a real listener, as in production.
func gateway(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// serveMemory serves p over a real listener with a fresh memory store.
func serveMemory(t *testing.T, p *policy.Policy) *httptest.Server {
	t.Helper()
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return gateway(t, h)
}

func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// recorder is an Observer that counts outcomes.
type recorder struct {
	shadowDenied atomic.Int64
	outcomes     sync.Map // proxy.Outcome → *atomic.Int64
}

func (r *recorder) Observe(ev *proxy.Event) {
	for i, h := range ev.Hits {
		if h.Limit.Shadow && !ev.Decisions[i].Allowed {
			r.shadowDenied.Add(1)
		}
	}
	v, _ := r.outcomes.LoadOrStore(ev.Outcome, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (r *recorder) count(o proxy.Outcome) int64 {
	v, ok := r.outcomes.Load(o)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
