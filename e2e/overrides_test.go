package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// overrideBody is the JSON body of PUT /admin/overrides.
func overrideBody(limit, who, rate string, expires time.Time, reason string) string {
	b, _ := json.Marshal(map[string]any{"limit": limit, strings.SplitN(who, "=", 2)[0]: strings.SplitN(who, "=", 2)[1],
		"rates": []string{rate}, "expires": expires.UTC().Format(time.RFC3339Nano), "reason": reason})
	return string(b)
}

// adminSend sends a request with a body to the admin listener.
func adminSend(t testing.TB, g *gw, method, path, token, body string) *response {
	t.Helper()
	hdr := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		hdr["Authorization"] = "Bearer " + token
	}
	r, err := tryDo(&http.Client{Timeout: 10 * time.Second}, method, g.adminURL(path), hdr, []byte(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// overrideList is the JSON of GET /admin/overrides.
type overrideList struct {
	Overrides []struct {
		Limit    string   `json:"limit"`
		Consumer string   `json:"consumer"`
		Key      string   `json:"key"`
		Subject  string   `json:"subject"`
		Rates    []string `json:"rates"`
		Expires  string   `json:"expires"`
		Reason   string   `json:"reason"`
		InForce  bool     `json:"in_force"`
		Problem  string   `json:"problem"`
	} `json:"overrides"`
}

func listOverrides(t testing.TB, g *gw, token string) overrideList {
	t.Helper()
	r := adminDo(t, g, "GET", "/admin/overrides", token)
	if r.Status != 200 {
		t.Fatalf("GET /admin/overrides: %s", r)
	}
	var l overrideList
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatalf("GET /admin/overrides: %v: %s", err, r.Body)
	}
	return l
}

// overrideLimits is the body shared by the override tests: "sticky",
// 5 per minute per client on an exact sliding log, on route /sticky.
var overrideLimits = limitTOML("sticky", "5/minute", "sliding_window_log", "client") + routeTOML("sticky", "/sticky", "sticky")

// checkOverrideRaisesAndRestores drives the override story through
// gateways gs (one for the memory store, two sharing one Redis): the
// client 127.0.0.3 uses its 5 requests a minute; an override raising the
// limit to 8/minute until a few seconds from now, PUT on the first
// gateway, admits exactly 3 more (the usage carries: same window, same
// counters) on every gateway within a second; /admin/limits and
// /admin/overrides show it; once it expires, the limit is 5 again, with
// the 8 used counted: nothing is admitted.
func checkOverrideRaisesAndRestores(t *testing.T, gs ...*gw) {
	c := newClient(t, "127.0.0.3")
	avoidWindowEdge(time.Minute)
	for i := range 5 {
		if r := get(t, c, gs[i%len(gs)].url("/sticky"), nil); r.Status != 200 {
			t.Fatalf("request %d: %s", i+1, r)
		}
	}
	for _, g := range gs {
		get(t, c, g.url("/sticky"), nil).problem(t, 429)
	}

	expires := time.Now().Add(6 * time.Second)
	r := adminSend(t, gs[0], "PUT", "/admin/overrides", "", overrideBody("sticky", "key=ip:127.0.0.3", "8/minute", expires, "load test"))
	if r.Status != 200 {
		t.Fatalf("PUT /admin/overrides: %s", r)
	}
	put := time.Now()
	// Every gateway sees it within a second, without a reload.
	for _, g := range gs {
		for {
			u := limitUsage(t, g, "", "sticky", "ip:127.0.0.3")
			if u.Windows[0].Limit == 8 {
				if d := time.Since(put); d > time.Second {
					t.Errorf("gateway %s saw the override %v after the PUT, want within 1s", g.Listen, d)
				}
				if w := u.Windows[0]; w.Used != 5 || w.Remaining != 3 {
					t.Errorf("usage under the override: %+v, want used 5 (carried), remaining 3", w)
				}
				break
			}
			if time.Since(put) > 3*time.Second {
				t.Fatalf("gateway %s never saw the override: %+v", g.Listen, u)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	got := countStatuses(6, func(i int) *response { return get(t, c, gs[i%len(gs)].url("/sticky"), nil) })
	if !got.exactly(3, 3) {
		t.Errorf("6 requests under the 8/minute override after 5 used: %v, want 3 × 200 and 3 × 429", got)
	}
	// Another client keeps the configured limit.
	other := newClient(t, "127.0.0.4")
	for i := range 6 {
		want := 200
		if i == 5 {
			want = 429
		}
		if r := get(t, other, gs[0].url("/sticky"), nil); r.Status != want {
			t.Fatalf("other client, request %d: %d, want %d", i+1, r.Status, want)
		}
	}
	l := listOverrides(t, gs[len(gs)-1], "")
	if len(l.Overrides) != 1 || !l.Overrides[0].InForce || l.Overrides[0].Key != "ip:127.0.0.3" ||
		l.Overrides[0].Reason != "load test" || len(l.Overrides[0].Rates) != 1 {
		t.Fatalf("GET /admin/overrides: %+v", l)
	}

	// After expires, the configured 5/minute again, with 8 counted.
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	for _, g := range gs {
		get(t, c, g.url("/sticky"), nil).problem(t, 429)
		if w := limitUsage(t, g, "", "sticky", "ip:127.0.0.3").Windows[0]; w.Limit != 5 || w.Remaining != 0 {
			t.Errorf("usage after expiry on %s: %+v, want limit 5, remaining 0", g.Listen, w)
		}
	}
	if l := listOverrides(t, gs[0], ""); len(l.Overrides) != 1 || l.Overrides[0].InForce || l.Overrides[0].Problem != "expired" {
		t.Errorf("GET /admin/overrides after expiry: %+v, want it listed as expired", l)
	}
	q := url.Values{"limit": {"sticky"}, "subject": {l.Overrides[0].Subject}}
	if r := adminDo(t, gs[0], "DELETE", "/admin/overrides?"+q.Encode(), ""); r.Status != 200 {
		t.Errorf("DELETE: %s", r)
	}
	if r := adminDo(t, gs[0], "DELETE", "/admin/overrides?"+q.Encode(), ""); r.Status != 404 {
		t.Errorf("second DELETE: %s, want 404", r)
	}
	if l := listOverrides(t, gs[len(gs)-1], ""); len(l.Overrides) != 0 {
		t.Errorf("after DELETE: %+v", l)
	}
}

// TestOverridesMemory: on the memory store an override raises a client's
// limit on this gateway and restores it when it expires.
func TestOverridesMemory(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", overrideExtra)})
	checkOverrideRaisesAndRestores(t, g)
}

// overrideExtra re-declares nothing: ops.toml.tmpl's "sticky" limit is
// 5/minute per client on /sticky, as the Redis body's.
const overrideExtra = ""

// TestOverridesRedisTwoGateways: two gateways on one Redis; an override PUT
// on one applies on both within a second, and expires on both.
func TestOverridesRedisTwoGateways(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	data := redisData(rs.Addr, nil, "deny", "2s", overrideLimits)
	g1 := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	g2 := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	checkOverrideRaisesAndRestores(t, g1, g2)
}

// TestOverridesSurviveReload: an override outlives a reload that changes
// its limit's numbers (it still gives its own), and one whose limit a
// reload removes is listed with the reason and applies nowhere.
func TestOverridesSurviveReload(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", quotaTOML)})
	exp := time.Now().Add(time.Hour)
	for _, b := range []string{
		overrideBody("per-key", "key=ip:127.0.0.6", "6/minute", exp, ""),
		overrideBody("quota-reads", "key=ip:127.0.0.6", "9/minute", exp, ""),
	} {
		if r := adminSend(t, g, "PUT", "/admin/overrides", "", b); r.Status != 200 {
			t.Fatalf("PUT %s: %s", b, r)
		}
	}
	before := time.Now()
	g.rewrite(t, map[string]any{"Rate": "2/minute", "Extra": ""})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("reload: %s", r)
	}
	waitReload(t, g, before)
	if w := limitUsage(t, g, "", "per-key", "ip:127.0.0.6").Windows[0]; w.Limit != 6 {
		t.Errorf("per-key after a reload to 2/minute: limit %d, want the override's 6", w.Limit)
	}
	c := newClient(t, "127.0.0.6")
	avoidWindowEdge(time.Minute)
	admitted := 0
	for range 8 {
		if get(t, c, g.url("/api/x"), nil).Status == 200 {
			admitted++
		}
	}
	if admitted != 6 {
		t.Errorf("%d of 8 admitted after the reload, want the override's 6", admitted)
	}
	for _, o := range listOverrides(t, g, "").Overrides {
		switch o.Limit {
		case "per-key":
			if !o.InForce {
				t.Errorf("per-key's override after the reload: %+v, want in force", o)
			}
		case "quota-reads":
			if o.InForce || !strings.Contains(o.Problem, "no limit of that name") {
				t.Errorf("the override of a removed limit: %+v, want not in force, naming why", o)
			}
		}
	}
}
