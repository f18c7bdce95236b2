package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// ratesOrderBody is a quota of 2 a day and 100 a month and a fixed window
// of 2 a minute and 100 per 30 days, each rates list in the order given.
func ratesOrderBody(quota, fixed string) string {
	return `[[limits]]
name = "monthly"
algorithm = "quota"
rates = [` + quota + `]
by = ["client"]

[[limits]]
name = "rate"
algorithm = "fixed_window"
rates = [` + fixed + `]
by = ["client"]

[[routes]]
name = "monthly"
path_prefix = "/monthly"
respond = { status = 200, body = "ok" }
limits = ["monthly"]

[[routes]]
name = "rate"
path_prefix = "/rate"
respond = { status = 200, body = "ok" }
limits = ["rate"]
`
}

// TestReloadReorderedRatesKeepsCounters: a client spends its 2 a day of a
// quota ("2/day", "100/month") and 2 of a fixed window ("2/minute",
// "100/30d"); a reload (SIGHUP) that lists each limit's rates in the other
// order keeps its counters, on the memory store and on Redis: the quota
// still denies the client, and /admin/limits still shows 2 used in every
// window (a reordered list once compiled to another limit ID, and every
// client started afresh — a monthly quota reset by a tidy-up). Both
// before and after, /admin/limits and RateLimit-Policy list a limit's
// windows shortest first, whatever the configured order.
func TestReloadReorderedRatesKeepsCounters(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		day := time.Now().UTC().YearDay()
		g := startGateway(t, "memkeys.toml.tmpl", gwOpts{Data: map[string]any{"Redis": redis, "MaxKeys": 0,
			"Body": ratesOrderBody(`"2/day", "100/month"`, `"2/minute", "100/30d"`)}})
		c := newClient(t, "")
		key := map[string]string{"X-API-Key": "customer"}
		for _, route := range []string{"/monthly", "/rate"} {
			for i := range 2 {
				if r := get(t, c, g.url(route), key); r.Status != 200 {
					t.Fatalf("%s request %d: %s", route, i+1, r)
				}
			}
		}
		r := get(t, c, g.url("/monthly"), key)
		if r.Status != 429 {
			t.Fatalf("third request on the quota: %s, want 429", r)
		}
		policy := r.Header.Get("RateLimit-Policy")
		if !strings.HasPrefix(policy, `"monthly.day";q=2;`) || !strings.Contains(policy, `, "monthly.month";q=100;`) {
			t.Errorf("RateLimit-Policy %q: want the day, then the month", policy)
		}
		windows := func(limit string) []usageWindow {
			t.Helper()
			r := adminDo(t, g, "GET", "/admin/limits?limit="+limit+"&key=api_key:customer", "")
			var u usage
			if r.Status != 200 || json.Unmarshal(r.Body, &u) != nil {
				t.Fatalf("GET /admin/limits %s: %s", limit, r)
			}
			return u.Windows
		}
		check := func(when string) {
			t.Helper()
			for _, tc := range []struct {
				limit string
				rates []string
			}{{"monthly", []string{"2/day", "100/month"}}, {"rate", []string{"2/minute", "100/720h"}}} {
				ws := windows(tc.limit)
				if len(ws) != 2 {
					t.Fatalf("%s: %s windows %+v, want 2", when, tc.limit, ws)
				}
				for i, w := range ws {
					if !strings.HasPrefix(w.Rate, strings.Split(tc.rates[i], "/")[0]+"/") {
						t.Errorf("%s: %s window %d is %q, want %q (shortest first)", when, tc.limit, i, w.Rate, tc.rates[i])
					}
				}
				// The minute's window may have rolled over; the longer one
				// has not.
				if long := ws[1]; long.Used != 2 {
					t.Errorf("%s: %s window %q used %d, want 2 (counters lost)", when, tc.limit, long.Rate, long.Used)
				}
			}
		}
		check("before the reload")

		rd := reloadAndWait(t, g, map[string]any{"Body": ratesOrderBody(`"100/month", "2/day"`, `"100/30d", "2/minute"`)})
		if !rd.LastReload.OK {
			t.Fatalf("reload with the rates reordered failed: %+v", rd.LastReload)
		}
		check("after the reload")
		r = get(t, c, g.url("/monthly"), key)
		if time.Now().UTC().YearDay() != day {
			t.Skip("the UTC day changed during the test: the daily quota was fresh again")
		}
		if r.Status != 429 {
			t.Fatalf("the quota after a reload that reordered its rates: %s, want still 429 (2 of 2 a day used)", r)
		}
		if p := r.Header.Get("RateLimit-Policy"); p != policy {
			t.Errorf("RateLimit-Policy after the reload %q, before %q", p, policy)
		}
	})
}
