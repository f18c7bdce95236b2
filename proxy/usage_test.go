package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// tokenPolicy is a route /v1 under a token budget of 1000 per hour
// (variant changes the limit) in front of an upstream answering the
// usage X-Usage names.
func tokenPolicy(t *testing.T, variant func(l *config.LimitConfig)) (*policy.Policy, *upstream) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen-Body", string(body))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[],"usage":{"total_tokens":`+r.Header.Get("X-Usage")+`}}`)
	})
	p := compile(t, func(c *config.Config) {
		l := limit("tokens", "fixed_window", "1000/1h")
		l.By = []string{"ip"}
		l.Count, l.CostRequestJSON, l.CostResponseJSON = "response", "max_tokens", "usage.total_tokens"
		if variant != nil {
			variant(&l)
		}
		c.Limits = []config.LimitConfig{l}
		c.Routes = []config.RouteConfig{route("llm", "/v1", up.URL, "tokens")}
	})
	return p, up
}

// TestTokenEstimateHostile: the proxy's answer to each request body of a
// token budget, and what it counted (docs/hostile-inputs.md, Token
// budgets); the body reaches the upstream intact.
func TestTokenEstimateHostile(t *testing.T) {
	p, up := tokenPolicy(t, nil)
	obs := &countedRecorder{}
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, body, usage string
		status            int
		counts            int64
	}{
		{"estimate 100, usage 40", `{"max_tokens":100}`, "40", 200, 40},
		{"no body: the cost", ``, "5", 200, 5},
		{"negative", `{"max_tokens":-1}`, "5", 400, 0},
		{"string", `{"max_tokens":"7"}`, "5", 400, 0},
		{"float", `{"max_tokens":7.5}`, "5", 400, 0},
		{"nested", `{"max_tokens":[7]}`, "5", 400, 0},
		{"not JSON", `{"max_tokens":7`, "5", 400, 0},
		{"usage above the estimate: charged", `{"max_tokens":10}`, "60", 200, 60},
		{"hostile usage: the estimate", `{"max_tokens":10}`, `"60"`, 200, 10},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/chat", strings.NewReader(c.body))
		r.Header.Set("X-Usage", c.usage)
		h.ServeHTTP(w, r)
		if w.Code != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, w.Code, c.status, w.Body)
		}
		if c.status == 200 {
			if hd, _ := up.last(); hd.Get("X-Usage") != c.usage {
				t.Fatalf("%s: the upstream did not see it", c.name)
			}
			if got := w.Header().Get("X-Seen-Body"); got != c.body {
				t.Fatalf("%s: the upstream saw the body %q, want %q", c.name, got, c.body)
			}
		}
		if got := obs.last(); got != c.counts {
			t.Errorf("%s: counted %d, want %d", c.name, got, c.counts)
		}
	}
}

// countedRecorder keeps the units the last request's first hit counted
// (Event.Counted; its cost when nil, 0 when no limit counted).
type countedRecorder struct {
	mu sync.Mutex
	n  int64
}

func (r *countedRecorder) Observe(ev *proxy.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(ev.Counted) > 0:
		r.n = ev.Counted[0]
	case len(ev.Decisions) > 0 && ev.Decisions[0].Counted:
		r.n = ev.Hits[0].Cost
	default:
		r.n = 0
	}
}

func (r *countedRecorder) last() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestTokenCandidate: a candidate configuration's token budget counts
// the usage the live budget settled to (Event.Counted), so a smaller
// candidate budget denies what the live one admitted.
func TestTokenCandidate(t *testing.T) {
	p, _ := tokenPolicy(t, nil)
	cand, _ := tokenPolicy(t, func(l *config.LimitConfig) { l.Rates = []string{"250/1h"} })
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denied []bool
	h.SetCandidate(&proxy.Candidate{Policy: cand, Store: memstore.New(memstore.Options{}), Record: func(o *proxy.CandidateOutcome) {
		mu.Lock()
		denied = append(denied, len(o.CandidateDenied) > 0)
		mu.Unlock()
	}})
	for range 4 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/chat", strings.NewReader(`{"max_tokens":10}`))
		r.Header.Set("X-Usage", "100")
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("live: %d", w.Code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// 100 tokens each against 250: the third would not fit.
	if len(denied) != 4 || denied[0] || denied[1] || !denied[2] || !denied[3] {
		t.Fatalf("candidate denials %v, want [false false true true]", denied)
	}
}
