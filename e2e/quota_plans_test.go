package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quotaPlansBody: plans free and pro; a quota "q" of 100/month and 10/day
// by consumer, costed by X-Cost, with the plans' numbers of its own; a
// route /q under it and a quota endpoint reporting /q. %s is the registry.
const quotaPlansBody = `[consumers]
file = "%s"

[[plans]]
name = "free"

[[plans]]
name = "pro"

[[limits]]
name = "q"
algorithm = "quota"
rates = ["100/month", "10/day"]
cost_header = "X-Cost"
by = ["consumer"]
[limits.plan_rates]
free = ["40/month", "4/day"]
pro = ["20/day", "400/month"]

[[routes]]
name = "q"
path_prefix = "/q"
respond = { status = 200, body = "ok" }
limits = ["q"]

[[routes]]
name = "budget"
path_prefix = "/rate_limit"
respond = { quota = true, routes = ["q"] }
`

// quotaPlansRegistry: acme on plan acmePlan with keys acme-1 and acme-2;
// carol on free with numbers of her own for q.
func quotaPlansRegistry(acmePlan string) string {
	return fmt.Sprintf(`[[consumers]]
name = "acme"
plan = "%s"
api_keys_sha256 = ["%s", "%s"]

[[consumers]]
name = "carol"
plan = "free"
api_keys_sha256 = ["%s"]
[consumers.rates]
q = ["1000/month", "7/day"]
`, acmePlan, keySum("acme-1"), keySum("acme-2"), keySum("carol-1"))
}

// quotaWindow is one window of q in a quota endpoint answer.
type quotaWindow struct {
	Rate          string `json:"rate"`
	Period        string `json:"period"`
	WindowSeconds int64  `json:"window_seconds"`
	Limit         int64  `json:"limit"`
	Used          int64  `json:"used"`
	Remaining     int64  `json:"remaining"`
}

// TestQuotaPlansAndCost: a calendar quota with plan rates, a consumer's
// own rates and a declared cost, through the binary on both stores, on a
// clock set to noon of March 15, 2025 (UTC). acme (free: 40/month,
// 4/day) is refused a cost of 5 (above its day, counted nowhere), then
// spends 3 with one key and 1 with the other: the next unit is
// denied and counts nothing; the quota endpoint shows free's numbers, the
// periods and March's length; carol gets her own 7/day. A reload moving
// acme to pro (400/month, 20/day) applies at once and keeps the 4 used:
// 16 more pass, the 17th is denied; /admin/limits key=consumer:acme shows
// pro's numbers and DELETE resets the quota for both keys. pro lists its periods day first: the
// same periods in another order are the same counters (before, they were
// other counters, and the move gave acme fresh quotas).
func TestQuotaPlansAndCost(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		reg := filepath.Join(t.TempDir(), "consumers.toml")
		writeFileAtomic(t, reg, []byte(quotaPlansRegistry("free")))
		off := time.Until(time.Date(2025, 3, 15, 12, 0, 0, 0, time.UTC))
		g := startGateway(t, "calendar.toml.tmpl", gwOpts{
			Data: map[string]any{"Redis": redis, "Body": fmt.Sprintf(quotaPlansBody, reg)},
			Env:  []string{clockSkewEnv + "=" + off.String()}})
		c := newClient(t, "")
		send := func(key string, cost int, want int) *response {
			t.Helper()
			r := get(t, c, g.url("/q"), map[string]string{"X-API-Key": key, "X-Cost": fmt.Sprint(cost)})
			if r.Status != want {
				t.Fatalf("%s cost %d: %s, want %d", key, cost, r, want)
			}
			return r
		}
		quota := func(key string, plan string, want ...quotaWindow) {
			t.Helper()
			r := get(t, c, g.url("/rate_limit"), map[string]string{"X-API-Key": key})
			var a struct {
				Consumer string `json:"consumer"`
				Plan     string `json:"plan"`
				Routes   []struct {
					Limits []struct {
						Limit   string        `json:"limit"`
						Windows []quotaWindow `json:"windows"`
					} `json:"limits"`
				} `json:"routes"`
			}
			if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != 200 || len(a.Routes) != 1 || len(a.Routes[0].Limits) != 1 {
				t.Fatalf("quota endpoint for %s: %s (%v)", key, r, err)
			}
			if a.Plan != plan {
				t.Errorf("quota endpoint for %s: plan %q, want %q", key, a.Plan, plan)
			}
			got := a.Routes[0].Limits[0].Windows
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("quota endpoint for %s: windows\n%+v\nwant\n%+v", key, got, want)
			}
		}
		const march, day = 31 * 86400, 86400
		// The limit lists the month first; every view shows a limit's
		// windows in canonical order, shortest first.
		// A cost within the limit's 10/day but above free's 4/day: 429,
		// counted nowhere.
		if r := send("acme-1", 5, 429); r.Header.Get("Retry-After") != "" {
			t.Errorf("a cost above the plan's capacity: Retry-After %q, want none (waiting never helps)", r.Header.Get("Retry-After"))
		}
		r := send("acme-1", 3, 200)
		if p := r.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"q.month";q=40;w=2678400`) || !strings.Contains(p, `"q.day";q=4;w=86400`) {
			t.Errorf("acme on free: RateLimit-Policy %q, want free's 40/month and 4/day", p)
		}
		send("acme-2", 1, 200)
		send("acme-1", 1, 429)
		quota("acme-2", "free",
			quotaWindow{"4/day", "day", day, 4, 4, 0},
			quotaWindow{"40/month", "month", march, 40, 4, 36})
		// carol's own numbers beat her plan's.
		send("carol-1", 7, 200)
		send("carol-1", 1, 429)
		quota("carol-1", "free",
			quotaWindow{"7/day", "day", day, 7, 7, 0},
			quotaWindow{"1000/month", "month", march, 1000, 7, 993})

		// acme moves to pro: pro's numbers at once, the 4 used kept.
		writeFileAtomic(t, reg, []byte(quotaPlansRegistry("pro")))
		if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
			t.Fatalf("POST /admin/reload: %s", r)
		}
		quota("acme-1", "pro",
			quotaWindow{"20/day", "day", day, 20, 4, 16},
			quotaWindow{"400/month", "month", march, 400, 4, 396})
		r = send("acme-2", 16, 200)
		if p := r.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"q.day";q=20;w=86400`) {
			t.Errorf("acme on pro: RateLimit-Policy %q, want pro's 20/day", p)
		}
		send("acme-1", 1, 429)
		quota("acme-1", "pro",
			quotaWindow{"20/day", "day", day, 20, 20, 0},
			quotaWindow{"400/month", "month", march, 400, 20, 380})
		// The admin API names the consumer, reads pro's numbers, and
		// DELETE gives both keys the day (and the month) back.
		// It reads at the gateway's clock (here March 15), as the
		// requests were counted.
		u := adminDo(t, g, "GET", "/admin/limits?limit=q&key=consumer:acme", "")
		var au struct {
			Windows []quotaWindow `json:"windows"`
		}
		if err := json.Unmarshal(u.Body, &au); err != nil || u.Status != 200 {
			t.Fatalf("GET /admin/limits key=consumer:acme: %s (%v)", u, err)
		}
		if want := []quotaWindow{{"20/day", "day", day, 20, 20, 0}, {"400/month", "month", march, 400, 20, 380}}; fmt.Sprint(au.Windows) != fmt.Sprint(want) {
			t.Errorf("GET /admin/limits key=consumer:acme: windows\n%+v\nwant\n%+v", au.Windows, want)
		}
		if r := adminDo(t, g, "DELETE", "/admin/limits?limit=q&key=consumer:acme", ""); r.Status != 200 {
			t.Fatalf("DELETE /admin/limits key=consumer:acme: %s", r)
		}
		send("acme-1", 10, 200)
		send("acme-2", 10, 200)
		send("acme-2", 1, 429)
	})
}
