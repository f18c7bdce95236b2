package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// slowReader is a client that takes 10s (on the handler's clock) to read
// each piece of the body.
type slowReader struct {
	*httptest.ResponseRecorder
	clock *atomic.Int64
}

func (s slowReader) Write(b []byte) (int, error) {
	s.clock.Add(int64(10 * time.Second))
	return s.ResponseRecorder.Write(b)
}

// TestAdaptiveSampleIsUpstreamTime: the latency an adaptive limit learns
// from is the upstream's time to its response header: a client that reads
// the body slowly does not make the upstream look slow (it would lower
// the limit for everyone). The handler's clock is the test's: only the
// client's reads advance it.
func TestAdaptiveSampleIsUpstreamTime(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 1024)))
	})
	p := compile(t, func(c *config.Config) {
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.By = "up", policy.AlgorithmAdaptive, nil
		c.Limits = []config.LimitConfig{l}
		c.Routes = []config.RouteConfig{route("all", "/", up.URL, "up")}
	})
	var clock atomic.Int64
	base := time.Unix(1_000_000, 0)
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}),
		Now: func() time.Time { return base.Add(time.Duration(clock.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		rw := slowReader{httptest.NewRecorder(), &clock}
		h.ServeHTTP(rw, httptest.NewRequest("GET", "/x", nil))
		if rw.Code != 200 {
			t.Fatalf("request %d: %d %s", i, rw.Code, rw.Body)
		}
	}
	st := h.AdaptiveStats()
	if len(st) != 1 || st[0].Windows < 2 {
		t.Fatalf("stats %+v: want one limiter that closed its windows", st)
	}
	if st[0].MinLatency >= time.Second || st[0].SampleLatency >= time.Second {
		t.Fatalf("base %v, sample %v: the client's 10s reads were taken for the upstream's time", st[0].MinLatency, st[0].SampleLatency)
	}
}
