package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

func TestProblemBodies(t *testing.T) {
	p := compile(t, func(c *config.Config) {
		l := limit("api", "fixed_window", "2/minute")
		l.CostHeader = "X-Cost"
		c.Limits = []config.LimitConfig{l}
		rt := route("demo", "/demo", "", "api")
		rt.Respond = &config.RespondConfig{Status: 200, Body: "hi"}
		c.Routes = []config.RouteConfig{rt}
	})
	var obs recorder
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{}), Observer: &obs})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway(t, h)
	for _, tc := range []struct {
		path, cost string
		status     int
		retryAfter bool
	}{
		{"/nope", "", 404, false},
		{"/demo", "-1", 400, false},
		{"/demo", "1.5", 400, false},
		{"/demo", "99999999999999999999999", 400, false},
		{"/demo", "3", 429, false}, // cost above capacity: no Retry-After
		{"/demo", "2", 200, false},
		{"/demo", "1", 429, true},
	} {
		var hdr []string
		if tc.cost != "" {
			hdr = []string{"X-Cost", tc.cost}
		}
		req, _ := http.NewRequest("GET", gw.URL+tc.path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s cost %q: status %d, want %d; body %s", tc.path, tc.cost, resp.StatusCode, tc.status, body)
			continue
		}
		if (resp.Header.Get("Retry-After") != "") != tc.retryAfter {
			t.Errorf("%s cost %q: Retry-After %q, want present=%v", tc.path, tc.cost, resp.Header.Get("Retry-After"), tc.retryAfter)
		}
		if tc.status != 200 {
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%s: Content-Type %q", tc.path, ct)
			}
			var pb map[string]any
			if err := json.Unmarshal(body, &pb); err != nil || pb["status"] != float64(tc.status) {
				t.Errorf("%s: body %s is not a problem with status %d", tc.path, body, tc.status)
			}
		}
	}
	if obs.count(proxy.OutcomeBadRequest) != 3 || obs.count(proxy.OutcomeNoRoute) != 1 || obs.count(proxy.OutcomeLimited) != 2 {
		t.Errorf("outcomes: bad_request=%d no_route=%d limited=%d, want 3, 1, 2",
			obs.count(proxy.OutcomeBadRequest), obs.count(proxy.OutcomeNoRoute), obs.count(proxy.OutcomeLimited))
	}
}

// TestNotFoundEchoBounded: a 404 names the method and path it could not
// route, each bounded to 256 bytes and "…" however long the client made
// them (net/http accepts a method token up to the header limit).
func TestNotFoundEchoBounded(t *testing.T) {
	p := compile(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{route("api", "/api", "http://127.0.0.1:1")}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	method := strings.Repeat("M", 10000)
	r := httptest.NewRequest("GET", "/elsewhere", nil)
	r.Method = method
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", w.Code)
	}
	want := `no route matches ` + strings.Repeat("M", 256) + `… /elsewhere`
	if body := w.Body.String(); !strings.Contains(body, want) || len(body) > 1024 {
		t.Fatalf("body (%d bytes) does not echo the method bounded to 256 bytes:\n%.600s", len(body), body)
	}
}
