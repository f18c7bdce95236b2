package candidate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// testPolicy is one respond route under a per-client limit of rate (""
// for no limit).
func testPolicy(t testing.TB, rate string) *policy.Policy {
	t.Helper()
	c := config.Default()
	r := config.DefaultRoute()
	r.Name, r.PathPrefix = "api", "/api"
	r.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
	if rate != "" {
		l := config.DefaultLimit()
		l.Name, l.Rates, l.By = "per-client", []string{rate}, []string{"client"}
		c.Limits = []config.LimitConfig{l}
		r.Limits = []string{"per-client"}
	}
	c.Routes = []config.RouteConfig{r}
	p, err := policy.Compile(c, os.Getenv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestManager serves live on a memory store; posted bodies compile to
// the policy of the rate they name ("rate = 3/minute"), anything else is
// invalid.
func newTestManager(t *testing.T, live *policy.Policy) (*Manager, *proxy.Handler) {
	t.Helper()
	h, err := proxy.New(live, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{
		Handler: h,
		Compile: func(data []byte) (*policy.Policy, error) {
			rate, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "rate = ")
			if !ok {
				return nil, errors.Join(errors.New("line 1: not a candidate"), errors.New("limits[0].rates[0]: missing"))
			}
			return testPolicy(t, rate), nil
		},
		NewStore: func(*policy.Policy) (ratelimit.Store, error) { return memstore.New(memstore.Options{}), nil },
		Promote:  h.Swap,
	})
	return m, h
}

func send(h http.Handler, method, path, body, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = client + ":1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestCandidateHostileInputs: what an admin client or traffic could send
// to make the candidate spend memory, change responses, or slip in an
// unchecked configuration.
func TestCandidateHostileInputs(t *testing.T) {
	t.Run("huge body is refused unread past 1 MiB", func(t *testing.T) {
		m, _ := newTestManager(t, testPolicy(t, "10/minute"))
		w := send(m, "POST", "/admin/candidate", strings.Repeat("x", MaxBody+1), "192.0.2.1")
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", w.Code)
		}
		if _, err := m.Report(); !errors.Is(err, ErrNone) {
			t.Fatal("a refused body must install nothing")
		}
	})
	t.Run("invalid body lists every problem, installs nothing", func(t *testing.T) {
		m, _ := newTestManager(t, testPolicy(t, "10/minute"))
		w := send(m, "POST", "/admin/candidate", "[[limits]\n", "192.0.2.1")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"limits[0].rates[0]: missing"`) {
			t.Fatalf("status %d %s, want 400 with each problem", w.Code, w.Body)
		}
		if _, err := m.Report(); !errors.Is(err, ErrNone) {
			t.Fatal("an invalid body must install nothing")
		}
	})
	t.Run("wrong methods and paths", func(t *testing.T) {
		m, _ := newTestManager(t, testPolicy(t, "10/minute"))
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{"PUT", "/admin/candidate", 405}, {"GET", "/admin/candidate/promote", 405},
			{"GET", "/admin/candidate", 404}, {"DELETE", "/admin/candidate", 404},
			{"POST", "/admin/candidate/promote", 404}, {"GET", "/admin/candidate/x", 404},
		} {
			if w := send(m, tc.method, tc.path, "", "192.0.2.1"); w.Code != tc.want {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.want)
			}
		}
	})
	t.Run("a denying candidate never changes a response", func(t *testing.T) {
		m, h := newTestManager(t, testPolicy(t, "100/minute"))
		if w := send(m, "POST", "/admin/candidate", "rate = 1/minute", "192.0.2.1"); w.Code != 201 {
			t.Fatalf("post: %d %s", w.Code, w.Body)
		}
		for i := 0; i < 5; i++ {
			w := send(h, "GET", "/api/x", "", "192.0.2.7")
			if w.Code != 200 || strings.Contains(w.Header().Get("RateLimit-Policy"), "q=1;") {
				t.Fatalf("request %d: %d %v: the candidate leaked into the response", i, w.Code, w.Header())
			}
		}
		rep, _ := m.Report()
		if rep.Requests != 5 || rep.ExtraDenials != 4 || rep.Limits["per-client"].ExtraDenials != 4 {
			t.Fatalf("report %+v: want 4 extra denials of 5", rep)
		}
	})
	t.Run("a candidate that never denies reports no divergence", func(t *testing.T) {
		m, h := newTestManager(t, testPolicy(t, "2/minute"))
		if w := send(m, "POST", "/admin/candidate", "rate = 1000/minute", "192.0.2.1"); w.Code != 201 {
			t.Fatalf("post: %d", w.Code)
		}
		for i := 0; i < 5; i++ {
			send(h, "GET", "/api/x", "", "192.0.2.8")
		}
		rep, _ := m.Report()
		// The live limit denied 3 the candidate would have allowed.
		if rep.ExtraDenials != 0 || rep.FewerDenials != 3 || rep.Limits["per-client"].FewerDenials != 3 || rep.AgreeAllowed != 2 {
			t.Fatalf("report %+v: want 3 fewer denials, none extra", rep)
		}
	})
	t.Run("many clients and divergences stay bounded", func(t *testing.T) {
		s := NewStats(time.Now(), nil)
		for i := 0; i < 10*MaxClients; i++ {
			s.Record(&proxy.CandidateOutcome{Client: fmt.Sprint("client-", i), ClientKind: "ip", CandidateDenied: []string{"l"}})
		}
		if len(s.clients) != MaxClients || len(s.samples) != MaxSamples {
			t.Fatalf("%d clients, %d samples held, want %d and %d", len(s.clients), len(s.samples), MaxClients, MaxSamples)
		}
		rep := s.Report("t")
		if len(rep.TopClients) != TopClients || rep.ExtraDenials != 10*MaxClients {
			t.Fatalf("report: %d top clients, %d extra", len(rep.TopClients), rep.ExtraDenials)
		}
		for _, c := range rep.TopClients {
			if strings.HasPrefix(c.Client, "client-") {
				t.Fatalf("raw identity %q in the report", c.Client)
			}
		}
	})
	t.Run("a failing candidate store is only counted", func(t *testing.T) {
		h, err := proxy.New(testPolicy(t, "100/minute"), proxy.Options{Store: memstore.New(memstore.Options{})})
		if err != nil {
			t.Fatal(err)
		}
		s := NewStats(time.Now(), nil)
		h.SetCandidate(&proxy.Candidate{Policy: testPolicy(t, "1/minute"), Store: failing{}, Record: s.Record})
		for i := 0; i < 3; i++ {
			if w := send(h, "GET", "/api/x", "", "192.0.2.9"); w.Code != 200 {
				t.Fatalf("status %d with a failing candidate store", w.Code)
			}
		}
		if rep := s.Report("t"); rep.StoreErrors != 3 || rep.ExtraDenials != 0 {
			t.Fatalf("report %+v: want 3 store errors", rep)
		}
	})
}

// failing is a store whose every decision fails.
type failing struct{ ratelimit.Store }

func (failing) Decide(context.Context, time.Time, []ratelimit.Hit, []ratelimit.Decision) (bool, error) {
	return false, errors.New("store down")
}

// TestPromoteKeepsCounters: a promoted candidate whose limit differs only
// in its number keeps the live counter (same limit ID), and the candidate
// stops.
func TestPromoteKeepsCounters(t *testing.T) {
	m, h := newTestManager(t, testPolicy(t, "10/minute"))
	for i := 0; i < 3; i++ {
		send(h, "GET", "/api/x", "", "192.0.2.10")
	}
	send(m, "POST", "/admin/candidate", "rate = 3/minute", "192.0.2.1")
	if w := send(m, "POST", "/admin/candidate/promote", "", "192.0.2.1"); w.Code != 200 {
		t.Fatalf("promote: %d %s", w.Code, w.Body)
	}
	if w := send(h, "GET", "/api/x", "", "192.0.2.10"); w.Code != 429 {
		t.Fatalf("4th request under 3/minute after promotion: %d, want 429", w.Code)
	}
	if h.Candidate() != nil {
		t.Fatal("the candidate still runs after promotion")
	}
}

// TestIdenticalCandidateAgrees: a candidate identical to the live
// configuration, on its own store, decides every request as the live one
// did (nothing diverges) while both deny, over mixed clients and a moving
// clock: the candidate sees the same request, identity, key and instant.
func TestIdenticalCandidateAgrees(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h, err := proxy.New(testPolicy(t, "5/minute"), proxy.Options{Store: memstore.New(memstore.Options{}),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStats(now, nil)
	h.SetCandidate(&proxy.Candidate{Policy: testPolicy(t, "5/minute"), Store: memstore.New(memstore.Options{}), Record: s.Record})
	denied := 0
	for i := 0; i < 400; i++ {
		now = now.Add(time.Duration(i%7) * 100 * time.Millisecond)
		if w := send(h, "GET", "/api/x", "", fmt.Sprintf("192.0.2.%d", i%9)); w.Code == 429 {
			denied++
		}
	}
	rep := s.Report("t")
	if rep.Requests != 400 || rep.ExtraDenials != 0 || rep.FewerDenials != 0 || rep.AgreeDenied != int64(denied) || denied == 0 {
		t.Fatalf("report %+v, %d denied live: want full agreement with some denials", rep, denied)
	}
}
