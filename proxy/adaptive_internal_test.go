package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

func adaptivePolicy(t *testing.T, max int64, by []string) *policy.Policy {
	t.Helper()
	c := config.Default()
	l := config.DefaultLimit()
	l.Name, l.Algorithm, l.By, l.MaxInFlight = "up", policy.AlgorithmAdaptive, by, max
	c.Limits = []config.LimitConfig{l}
	for _, name := range []string{"a", "b"} {
		r := config.DefaultRoute()
		r.Name, r.PathPrefix, r.Upstream, r.Limits = name, "/"+name, "http://127.0.0.1:9", []string{"up"}
		c.Routes = append(c.Routes, r)
	}
	p, err := policy.Compile(c, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdaptiveKeptAcrossSwaps: a reload that keeps an adaptive limit
// keeps its limiter (what it learned); one that changes its numbers
// starts afresh; by = [] shares one limiter between routes, by =
// ["route"] gives each its own.
func TestAdaptiveKeptAcrossSwaps(t *testing.T) {
	var set adaptiveLimiters
	now := time.Unix(1000, 0)
	p1 := adaptivePolicy(t, 100, nil)
	m1 := set.update(p1, now)
	if a, b := m1[p1.Routes[0]][0], m1[p1.Routes[1]][0]; a != b {
		t.Fatal("by = []: the two routes have limiters of their own, want one shared")
	}
	p2 := adaptivePolicy(t, 100, nil)
	m2 := set.update(p2, now)
	if m2[p2.Routes[0]][0] != m1[p1.Routes[0]][0] {
		t.Fatal("an unchanged limit lost its limiter on reload")
	}
	p3 := adaptivePolicy(t, 200, nil)
	m3 := set.update(p3, now)
	if m3[p3.Routes[0]][0] == m1[p1.Routes[0]][0] {
		t.Fatal("a limit whose ceiling changed kept its old limiter")
	}
	p4 := adaptivePolicy(t, 200, []string{"route"})
	m4 := set.update(p4, now)
	if m4[p4.Routes[0]][0] == m4[p4.Routes[1]][0] {
		t.Fatal(`by = ["route"]: the routes share a limiter, want one each`)
	}
	if len(set.m) != 2 {
		t.Fatalf("%d limiters kept, want the current policy's 2", len(set.m))
	}
}

// slowClient takes 10s (on the handler's clock) to read each piece of a
// response body.
type slowClient struct {
	*httptest.ResponseRecorder
	clock *atomic.Int64
}

func (s slowClient) Write(b []byte) (int, error) {
	s.clock.Add(int64(10 * time.Second))
	return s.ResponseRecorder.Write(b)
}

// TestCandidateAdaptiveSampleIsUpstreamTime: a candidate configuration's
// adaptive limiter learns from the same sample as a live one, the
// upstream's time to its response header. It took the whole exchange, a
// slow client's reading included, so a candidate reported sheddings the
// live limit would never make.
func TestCandidateAdaptiveSampleIsUpstreamTime(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 1024)))
	}))
	defer up.Close()
	build := func(adaptive bool) *policy.Policy {
		c := config.Default()
		r := config.DefaultRoute()
		r.Name, r.PathPrefix, r.Upstream = "all", "/", up.URL
		if adaptive {
			l := config.DefaultLimit()
			l.Name, l.Algorithm, l.By = "up", policy.AlgorithmAdaptive, nil
			c.Limits = []config.LimitConfig{l}
			r.Limits = []string{"up"}
		}
		c.Routes = []config.RouteConfig{r}
		p, err := policy.Compile(c, func(string) string { return "" }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var clock atomic.Int64
	base := time.Unix(1_000_000, 0)
	h, err := New(build(false), Options{Store: memstore.New(memstore.Options{}),
		Now: func() time.Time { return base.Add(time.Duration(clock.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	h.SetCandidate(&Candidate{Policy: build(true), Store: memstore.New(memstore.Options{}), Record: func(*CandidateOutcome) {}})
	for i := range 24 {
		rw := slowClient{httptest.NewRecorder(), &clock}
		h.ServeHTTP(rw, httptest.NewRequest("GET", "/x", nil))
		if rw.Code != 200 {
			t.Fatalf("request %d: %d %s", i, rw.Code, rw.Body)
		}
	}
	a := h.cand.ad.Load()
	if a == nil || len(a.lims) != 1 {
		t.Fatal("the candidate's adaptive limiter was not made")
	}
	for _, ls := range a.lims {
		st := ls[0].Stats()
		if st.Windows < 2 {
			t.Fatalf("candidate limiter %+v: want its windows closed", st)
		}
		if st.MinLatency >= time.Second || st.SampleLatency >= time.Second {
			t.Fatalf("candidate base %v, sample %v: the client's 10s reads were taken for the upstream's time", st.MinLatency, st.SampleLatency)
		}
	}
}

// TestAdaptiveSampleTable: what an exchange teaches an adaptive limit,
// by how it went. The instants are on one clock: the forward began at 0
// and ended at 10s; the header came at headerAt (0: never written); the
// request's body had all arrived at eofAt (0: no body).
func TestAdaptiveSampleTable(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	h := &Handler{now: func() time.Time { return at(10) }}
	ok := &policy.Route{}
	for _, tc := range []struct {
		name            string
		rt              *policy.Route
		outcome         Outcome
		status          int
		upstream        float64 // seconds
		headerAt, eofAt float64
		want            adaptive.Outcome
		wantLat         float64
	}{
		{"answered at 2s, the response read until 10s", ok, OutcomeForwarded, 200, 10, 2, 0, adaptive.Success, 2},
		{"no header recorded: the whole exchange", ok, OutcomeForwarded, 200, 10, 0, 0, adaptive.Success, 10},
		{"an upgrade whose 101 came at 0.5s", ok, OutcomeForwarded, 101, 10, 0.5, 0, adaptive.Success, 0.5},
		{"a body trickled until 7s, answered at 7.25s", ok, OutcomeForwarded, 200, 10, 7.25, 7, adaptive.Success, 0.25},
		{"answered at 1s before the body ended at 3s", ok, OutcomeForwarded, 200, 10, 1, 3, adaptive.Success, 1},
		{"5xx", ok, OutcomeForwarded, 503, 10, 1, 0, adaptive.Failure, 0},
		{"the upstream's 429", ok, OutcomeForwarded, 429, 10, 0.01, 0, adaptive.Failure, 0},
		{"a 404 answered at once", ok, OutcomeForwarded, 404, 10, 0.001, 0, adaptive.Ignore, 0},
		{"a 408 (upload cut at the timeout)", ok, OutcomeForwarded, 408, 10, 10, 0, adaptive.Ignore, 0},
		{"an upstream error", ok, OutcomeUpstreamError, 502, 10, 0, 0, adaptive.Failure, 0},
		{"the client left", ok, OutcomeCanceled, 0, 10, 0, 0, adaptive.Ignore, 0},
		{"never forwarded", ok, OutcomeForwarded, 200, 0, 0, 0, adaptive.Ignore, 0},
		{"a respond route", &policy.Route{Respond: &policy.Respond{}}, OutcomeForwarded, 200, 10, 1, 0, adaptive.Ignore, 0},
	} {
		q := &request{rt: tc.rt}
		q.ev.Outcome, q.ev.Upstream = tc.outcome, time.Duration(tc.upstream*float64(time.Second))
		q.w.status = tc.status
		if tc.headerAt > 0 {
			q.ad.headerAt = at(tc.headerAt)
		}
		if tc.eofAt > 0 {
			q.body = &bodyReader{}
			q.body.eofAt.Store(at(tc.eofAt).UnixNano())
		}
		o, lat := h.sample(q)
		if o != tc.want || lat != time.Duration(tc.wantLat*float64(time.Second)) {
			t.Errorf("%s: %v %v, want %v %vs", tc.name, o, lat, tc.want, tc.wantLat)
		}
	}
}
