package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// policyWindow returns the w of the RateLimit-Policy item named item.
func policyWindow(t *testing.T, r *response, item string) int64 {
	t.Helper()
	for _, it := range strings.Split(r.Header.Get("RateLimit-Policy"), ",") {
		it = strings.TrimSpace(it)
		if !strings.HasPrefix(it, strconv.Quote(item)+";") {
			continue
		}
		for _, p := range strings.Split(it, ";") {
			if v, ok := strings.CutPrefix(p, "w="); ok {
				w, _ := strconv.ParseInt(v, 10, 64)
				return w
			}
		}
	}
	t.Fatalf("no item %q in RateLimit-Policy %q", item, r.Header.Get("RateLimit-Policy"))
	return 0
}

// TestQuotaResetsAtLocalMidnight: a monthly quota in New York, on a
// gateway whose clock is set a few seconds before midnight of March 1,
// 2025 there (05:00 UTC: a quota counted in UTC would have reset five
// hours earlier): 3 requests pass, the 4th gets 429 with Retry-After the
// seconds to local midnight, RateLimit-Policy w is February's length (28
// days); from midnight on the quota is fresh and w is March's (31 days
// less the hour DST takes on March 9).
func TestQuotaResetsAtLocalMidnight(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		midnight := time.Date(2025, 3, 1, 0, 0, 0, 0, ny)
		off := time.Until(midnight.Add(-6 * time.Second))
		body := `[[limits]]
name = "monthly"
algorithm = "quota"
rates = ["3/month"]
timezone = "America/New_York"
by = ["client"]

[[routes]]
name = "q"
path_prefix = "/q"
respond = { status = 200, body = "ok" }
limits = ["monthly"]

[[routes]]
name = "budget"
path_prefix = "/rate_limit"
respond = { quota = true, routes = ["q"] }
`
		g := startGateway(t, "calendar.toml.tmpl", gwOpts{Data: map[string]any{"Redis": redis, "Body": body},
			Env: []string{clockSkewEnv + "=" + off.String()}})
		// The memory store warns at startup that a quota does not survive
		// a restart; Redis does not need to.
		if warned := strings.Contains(g.output(), "a quota on the memory store is lost"); warned != (redis == "") {
			t.Errorf("startup warning about a memory-store quota: %v, want %v:\n%s", warned, redis == "", g.output())
		}
		fake := func() time.Time { return time.Now().Add(off) }
		if left := midnight.Sub(fake()); left < time.Second {
			t.Fatalf("the gateway took until %s before midnight to start (machine overloaded)", left)
		}
		c := newClient(t, "")
		key := map[string]string{"X-API-Key": "customer-1"}
		for i := range 3 {
			r := get(t, c, g.url("/q"), key)
			if r.Status != 200 {
				t.Fatalf("request %d: %s", i+1, r)
			}
			if w := policyWindow(t, r, "monthly"); w != 28*86400 {
				t.Errorf("request %d: RateLimit-Policy w = %d, want February's %d", i+1, w, 28*86400)
			}
		}
		// The quota endpoint shows the period, its length and what is left.
		qa := get(t, c, g.url("/rate_limit"), key)
		for _, want := range []string{`"rate":"3/month"`, `"period":"month"`, `"window_seconds":2419200`, `"remaining":0`} {
			if qa.Status != 200 || !strings.Contains(string(qa.Body), want) {
				t.Errorf("quota endpoint: %s; want %s in it", qa, want)
			}
		}
		r := get(t, c, g.url("/q"), key)
		r.problem(t, 429)
		ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		left := midnight.Sub(fake())
		if want := int(left.Seconds()) + 1; ra < want-1 || ra > want+1 {
			t.Errorf("Retry-After %d, want the %s to local midnight", ra, left)
		}
		time.Sleep(midnight.Sub(fake()) + 100*time.Millisecond)
		for i := range 3 {
			r := get(t, c, g.url("/q"), key)
			if r.Status != 200 {
				t.Fatalf("after midnight, request %d: %s", i+1, r)
			}
			if w := policyWindow(t, r, "monthly"); w != 31*86400-3600 {
				t.Errorf("after midnight: RateLimit-Policy w = %d, want March's %d", w, 31*86400-3600)
			}
		}
		get(t, c, g.url("/q"), key).problem(t, 429)
	})
}

// TestPenaltyOutlastsWindow: `2/1s` with penalty = "3s": the 3rd request
// is denied with Retry-After 3; after the window has reset the client is
// still denied (Retry-After the penalty's remaining 2 s), while another
// client is not; /admin/limits shows the penalty and DELETE ends it; a
// penalty not removed ends by itself after 3 s.
func TestPenaltyOutlastsWindow(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		body := `[[limits]]
name = "login"
algorithm = "fixed_window"
rates = ["2/1s"]
penalty = "3s"
by = ["client"]

[[routes]]
name = "l"
path_prefix = "/login"
respond = { status = 200, body = "ok" }
limits = ["login"]
`
		g := startGateway(t, "calendar.toml.tmpl", gwOpts{Data: map[string]any{"Redis": redis, "Body": body}})
		c := newClient(t, "")
		a := map[string]string{"X-API-Key": "abuser"}
		b := map[string]string{"X-API-Key": "bystander"}
		trip := func() time.Time {
			t.Helper()
			// Start just after a second boundary, so the three fall in
			// one window.
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
			for i := range 2 {
				if r := get(t, c, g.url("/login"), a); r.Status != 200 {
					t.Fatalf("request %d: %s", i+1, r)
				}
			}
			r := get(t, c, g.url("/login"), a)
			r.problem(t, 429)
			if ra := r.Header.Get("Retry-After"); ra != "3" {
				t.Errorf("the denial that starts the penalty: Retry-After %q, want 3", ra)
			}
			return time.Now()
		}
		start := trip()
		time.Sleep(time.Until(start.Add(1100 * time.Millisecond)))
		r := get(t, c, g.url("/login"), a)
		r.problem(t, 429)
		if ra := r.Header.Get("Retry-After"); ra != "2" {
			t.Errorf("in the box after the window reset: Retry-After %q, want 2", ra)
		}
		if r := get(t, c, g.url("/login"), b); r.Status != 200 {
			t.Errorf("another client: %s", r)
		}
		u := adminDo(t, g, "GET", "/admin/limits?limit=login&key=api_key:abuser", "")
		var usage struct {
			PenaltySeconds float64 `json:"penalty_seconds"`
		}
		if err := json.Unmarshal(u.Body, &usage); err != nil || u.Status != 200 || usage.PenaltySeconds <= 0 || usage.PenaltySeconds > 2 {
			t.Errorf("GET /admin/limits: %s; want penalty_seconds in (0, 2]", u)
		}
		if r := adminDo(t, g, "DELETE", "/admin/limits?limit=login&key=api_key:abuser", ""); r.Status != 200 {
			t.Fatalf("DELETE /admin/limits: %s", r)
		}
		if r := get(t, c, g.url("/login"), a); r.Status != 200 {
			t.Errorf("after DELETE /admin/limits: %s", r)
		}
		start = trip()
		time.Sleep(time.Until(start.Add(3100 * time.Millisecond)))
		if r := get(t, c, g.url("/login"), a); r.Status != 200 {
			t.Errorf("after the penalty: %s", r)
		}
	})
}

// TestPenaltySharedMissingWarning: a penalty on a limit keyed by a part a
// client may leave out (api_key), with on_missing = "shared", boxes every
// keyless client together: four keyless requests past 3/15m put every
// keyless client, from any address, in the box. `gateway validate` and
// startup warn about it with the limit's field path, naming penalty and
// on_missing; with on_missing = "ip" neither warns.
func TestPenaltySharedMissingWarning(t *testing.T) {
	t.Parallel()
	const body = `[[limits]]
name = "login"
algorithm = "fixed_window"
rates = ["3/15m"]
penalty = "15m"
by = ["api_key"]
%s
[[routes]]
name = "l"
path_prefix = "/login"
respond = { status = 200, body = "ok" }
limits = ["login"]
`
	const warning = `limits[0].penalty ("login"): with on_missing = "shared", every request without a value for key part api_key shares one counter`
	for _, tc := range []struct {
		onMissing string
		warn      bool
	}{
		{"", true}, // shared is the default
		{`on_missing = "shared"`, true},
		{`on_missing = "ip"`, false},
	} {
		cfg := filepath.Join(t.TempDir(), "gateway.toml")
		if err := os.WriteFile(cfg, []byte(strings.Replace(body, "%s", tc.onMissing, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg)
		if code != 0 {
			t.Fatalf("%s: validate exited %d:\n%s%s", tc.onMissing, code, stdout, stderr)
		}
		if got := strings.Contains(stderr, "warning: "+warning); got != tc.warn {
			t.Errorf("%q: validate warned %v, want %v:\n%s", tc.onMissing, got, tc.warn, stderr)
		}
	}
	g := startGateway(t, "calendar.toml.tmpl", gwOpts{Data: map[string]any{"Redis": "",
		"Body": strings.Replace(body, "%s", "", 1)}})
	if !strings.Contains(g.output(), `"level":"WARN","msg":"`+strings.ReplaceAll(warning, `"`, `\"`)) {
		t.Errorf("startup logged no penalty warning:\n%s", g.output())
	}
	// What the warning is about: three keyless logins from one address
	// fill the shared counter, the fourth starts the penalty, and a
	// keyless client from another address is in the box with it.
	a, b := newClient(t, "127.0.0.1"), newClient(t, "127.0.0.2")
	for i := range 3 {
		if r := get(t, a, g.url("/login"), nil); r.Status != 200 {
			t.Fatalf("keyless login %d: %s", i+1, r)
		}
	}
	get(t, a, g.url("/login"), nil).problem(t, 429)
	get(t, b, g.url("/login"), nil).problem(t, 429)
	if r := get(t, b, g.url("/login"), map[string]string{"X-API-Key": "k"}); r.Status != 200 {
		t.Errorf("a client with a key: %s", r)
	}
}
