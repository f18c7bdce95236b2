package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestWindowsOneShape: GET /admin/limits and a quota route report a
// client's windows in the same bytes, for every kind of window (two fixed
// windows, a token bucket's burst, GCRA, a concurrency limit, a calendar
// quota in a zone with a DST day), after the same three requests on a
// fixed clock (the admin API's indented, compacted). The expected bytes
// are worked out by hand: noon of New York's 23-hour March 10, 2024 is
// 12 hours before the next day and 516 before April.
func TestWindowsOneShape(t *testing.T) {
	ny := time.Date(2024, 3, 10, 12, 0, 0, 0, mustZone(t, "America/New_York"))
	p := policytest.Compile(t, func(c *config.Config) {
		lim := func(name, alg string, rates ...string) config.LimitConfig {
			l := config.DefaultLimit()
			l.Name, l.Algorithm, l.Rates, l.By = name, alg, rates, []string{"api_key"}
			return l
		}
		tb := lim("tb", "token_bucket", "10/1s")
		tb.Burst = 25
		conc := lim("conc", "concurrency")
		conc.MaxInFlight = 4
		q := lim("q", "quota", "100/month", "5/day")
		q.Timezone = "America/New_York"
		c.Limits = []config.LimitConfig{lim("fw", "fixed_window", "3/1m", "10/1h"), tb, lim("gcra", "gcra", "60/1m"), conc, q}
		api := config.DefaultRoute()
		api.Name, api.PathPrefix, api.Limits = "api", "/api", []string{"fw", "tb", "gcra", "conc", "q"}
		api.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		quota := config.DefaultRoute()
		quota.Name, quota.PathPrefix = "quota", "/quota"
		quota.Respond = &config.RespondConfig{Quota: true, Routes: []string{"api"}}
		c.Routes = []config.RouteConfig{api, quota}
	})
	store := memstore.New(memstore.Options{MaxKeys: 1000})
	t.Cleanup(func() { store.Close() })
	now := func() time.Time { return ny }
	gw, err := proxy.New(p, proxy.Options{Store: store, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	adm := Handler(Options{Store: store, Policy: gw.Policy, Now: now})
	get := func(h http.Handler, path string) []byte {
		t.Helper()
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("X-API-Key", "alice")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
		}
		b, _ := io.ReadAll(w.Body)
		return b
	}
	for range 3 {
		get(gw, "/api/x")
	}
	var ans struct {
		Routes []struct {
			Limits []struct {
				Limit   string          `json:"limit"`
				Windows json.RawMessage `json:"windows"`
			} `json:"limits"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(get(gw, "/quota"), &ans); err != nil || len(ans.Routes) != 1 {
		t.Fatalf("quota answer: %+v, %v", ans, err)
	}
	want := map[string]string{
		"fw": `[{"rate":"3/1m0s","limit":3,"window_seconds":60,"used":3,"remaining":0,"reset_seconds":60},` +
			`{"rate":"10/1h0m0s","limit":10,"window_seconds":3600,"used":3,"remaining":7,"reset_seconds":3600}]`,
		"tb":   `[{"rate":"10/1s","limit":25,"window_seconds":1,"used":3,"remaining":22,"reset_seconds":0.1}]`,
		"gcra": `[{"rate":"60/1m0s","limit":60,"window_seconds":60,"used":3,"remaining":57,"reset_seconds":1}]`,
		"conc": `[{"limit":4,"used":0,"remaining":4,"reset_seconds":0}]`,
		"q": `[{"rate":"5/day","limit":5,"window_seconds":82800,"period":"day","used":3,"remaining":2,"reset_seconds":43200},` +
			`{"rate":"100/month","limit":100,"window_seconds":2674800,"period":"month","used":3,"remaining":97,"reset_seconds":1857600}]`,
	}
	if len(ans.Routes[0].Limits) != len(want) {
		t.Fatalf("quota answer has %d limits, want %d", len(ans.Routes[0].Limits), len(want))
	}
	for _, ql := range ans.Routes[0].Limits {
		var u struct {
			Windows json.RawMessage `json:"windows"`
		}
		if err := json.Unmarshal(get(adm, "/admin/limits?limit="+ql.Limit+"&key=alice"), &u); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, u.Windows); err != nil {
			t.Fatal(err)
		}
		if compact.String() != string(ql.Windows) {
			t.Errorf("%s: admin windows\n %s\nquota route windows\n %s", ql.Limit, compact.Bytes(), ql.Windows)
		}
		if string(ql.Windows) != want[ql.Limit] {
			t.Errorf("%s: windows\n %s\nwant\n %s", ql.Limit, ql.Windows, want[ql.Limit])
		}
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
