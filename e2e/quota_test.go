package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// quotaTOML adds a quota route, /rate_limit, reporting routes "sticky" and
// "quota", under its own limit of 6 a minute per client.
const quotaTOML = `
[[limits]]
name = "quota-reads"
rates = ["6/minute"]
algorithm = "sliding_window_log"
by = ["client"]

[[routes]]
name = "quota"
path_prefix = "/rate_limit"
respond = { quota = true, routes = ["sticky", "quota"] }
limits = ["quota-reads"]
`

// quotaAnswer is the JSON of a quota route's answer.
type quotaAnswer struct {
	Client   string `json:"client"`
	Consumer string `json:"consumer"`
	Plan     string `json:"plan"`
	Routes   []struct {
		Route  string `json:"route"`
		Limits []struct {
			Limit           string        `json:"limit"`
			Exempt          bool          `json:"exempt"`
			Rejected        string        `json:"rejected"`
			OverrideExpires string        `json:"override_expires"`
			Windows         []usageWindow `json:"windows"`
		} `json:"limits"`
	} `json:"routes"`
}

// remaining returns the remaining of route's limit's first window.
func (a *quotaAnswer) remaining(t testing.TB, route, limit string) int64 {
	t.Helper()
	for _, r := range a.Routes {
		for _, l := range r.Limits {
			if r.Route == route && l.Limit == limit {
				if len(l.Windows) != 1 {
					t.Fatalf("quota %s/%s: %d windows, want 1", route, limit, len(l.Windows))
				}
				return l.Windows[0].Remaining
			}
		}
	}
	t.Fatalf("quota answer has no %s/%s: %+v", route, limit, a)
	return 0
}

func getQuota(t testing.TB, g *gw, c *http.Client, hdr map[string]string) *quotaAnswer {
	t.Helper()
	r := get(t, c, g.url("/rate_limit"), hdr)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /rate_limit: %s", r)
	}
	var a quotaAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("quota answer: %v: %s", err, r.Body)
	}
	return &a
}

// checkQuotaMatchesNext: through gateways gs, a client that used 2 of
// sticky's 5 a minute reads remaining 3, and exactly 3 more requests pass;
// reading the quota counts against nothing but the quota route's own
// limit (6 a minute: the 7th read is 429); headers and the query cannot
// make it report another client.
func checkQuotaMatchesNext(t *testing.T, gs ...*gw) {
	c := newClient(t, "127.0.0.5")
	avoidWindowEdge(time.Minute)
	for i := range 2 {
		if r := get(t, c, gs[i%len(gs)].url("/sticky"), nil); r.Status != 200 {
			t.Fatalf("request %d: %s", i+1, r)
		}
	}
	a := getQuota(t, gs[0], c, nil)
	if a.Client != "ip" || len(a.Routes) != 2 || a.Routes[0].Route != "sticky" || a.Routes[1].Route != "quota" {
		t.Fatalf("quota answer: %+v", a)
	}
	rem := a.remaining(t, "sticky", "sticky")
	if rem != 3 {
		t.Errorf("sticky remaining %d after 2 of 5, want 3", rem)
	}
	if q := a.remaining(t, "quota", "quota-reads"); q != 5 {
		t.Errorf("quota-reads remaining %d after this one read, want 5", q)
	}
	// Reading again changes nothing on sticky; a spoofed identity in a
	// header the gateway does not trust, or in the query, is ignored.
	b := getQuota(t, gs[len(gs)-1], c, map[string]string{"X-Forwarded-For": "127.0.0.9", "X-Real-IP": "127.0.0.9"})
	if got := b.remaining(t, "sticky", "sticky"); got != rem {
		t.Errorf("sticky remaining after reading the quota twice: %d, want %d", got, rem)
	}
	r := get(t, c, gs[0].url("/rate_limit?key=ip:127.0.0.9&client=127.0.0.9"), nil)
	var spoof quotaAnswer
	if r.Status != 200 || json.Unmarshal(r.Body, &spoof) != nil || spoof.remaining(t, "sticky", "sticky") != rem {
		t.Errorf("quota with a spoofing query: %s, want the caller's own remaining %d", r, rem)
	}
	// The next requests observe exactly what the answer said.
	admitted := int64(0)
	for i := range 6 {
		if get(t, c, gs[i%len(gs)].url("/sticky"), nil).Status == 200 {
			admitted++
		}
	}
	if admitted != rem {
		t.Errorf("%d requests admitted after the quota said remaining %d", admitted, rem)
	}
	if got := getQuota(t, gs[0], c, nil).remaining(t, "sticky", "sticky"); got != 0 {
		t.Errorf("sticky remaining %d after the limit denied, want 0", got)
	}
	// Four reads so far; the quota route's own limit admits 6 a minute.
	for i := 5; i <= 6; i++ {
		if r := get(t, c, gs[0].url("/rate_limit"), nil); r.Status != 200 {
			t.Fatalf("quota read %d: %s", i, r)
		}
	}
	get(t, c, gs[0].url("/rate_limit"), nil).problem(t, 429)
}

// TestQuotaEndpointMemory: the quota answer's remaining is what the next
// requests observe, on the memory store.
func TestQuotaEndpointMemory(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", quotaTOML)})
	checkQuotaMatchesNext(t, g)
}

// TestQuotaEndpointRedis: the same through two gateways sharing Redis.
func TestQuotaEndpointRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	data := redisData(rs.Addr, nil, "deny", "2s", overrideLimits+quotaTOML)
	g1 := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	g2 := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	checkQuotaMatchesNext(t, g1, g2)

	// With Redis gone, a gateway whose requests fall back to local
	// counters (on_error = "local") cannot read the shared ones: the
	// quota answer is 503, never the local counters' numbers.
	g3 := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "local", "200ms", overrideLimits+quotaTOML)})
	rs.Kill()
	r := get(t, newClient(t, "127.0.0.5"), g3.url("/rate_limit"), nil)
	r.problem(t, 503)
	if ra, ok := r.retryAfter(t); !ok || ra != 1 {
		t.Errorf("quota with the store down: Retry-After %d (present %v), want 1", ra, ok)
	}
}
