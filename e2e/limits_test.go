package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sfItem is one item of an RFC 8941 list as the ratelimit headers use it:
// a quoted name and integer parameters.
type sfItem struct {
	Name   string
	Params map[string]int64
}

// parseSFList parses `"a";q=1;w=2, "b";q=3` (names without commas).
func parseSFList(t testing.TB, field, v string) []sfItem {
	t.Helper()
	var out []sfItem
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		segs := strings.Split(part, ";")
		name := segs[0]
		if len(name) < 2 || name[0] != '"' || name[len(name)-1] != '"' {
			t.Fatalf("%s: item %q is not a quoted sf-string name (value %q)", field, part, v)
		}
		it := sfItem{Name: name[1 : len(name)-1], Params: map[string]int64{}}
		for _, p := range segs[1:] {
			k, val, ok := strings.Cut(p, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if !ok || err != nil {
				t.Fatalf("%s: parameter %q of %q is not key=integer", field, p, v)
			}
			it.Params[k] = n
		}
		out = append(out, it)
	}
	return out
}

// want is what one response's rate-limit headers must say.
type want struct {
	limit     int64 // quota of the reported window
	window    int64 // seconds of the reported window
	remaining int64
	denied    bool
	// maxWait bounds Retry-After and t in seconds; 0 means window. The
	// sliding window counter's estimate can keep a full window's weight
	// for up to two windows, so its waits reach 2W.
	maxWait int64
}

// checkStyles checks the headers of every style in emit against w and
// that the styles not in emit are absent.
func checkStyles(t testing.TB, r *response, emit []string, policy string, w want) {
	t.Helper()
	has := map[string]bool{}
	for _, s := range emit {
		has[s] = true
	}
	now := time.Now().Unix()
	maxWait := w.window
	if w.maxWait > 0 {
		maxWait = w.maxWait
	}
	ra, raOK := r.retryAfter(t)
	if w.denied && !raOK {
		t.Errorf("429 without Retry-After: %s", r)
	}
	if !w.denied && raOK {
		t.Errorf("allowed response carries Retry-After: %s", r)
	}
	if w.denied && (ra < 1 || ra > maxWait) {
		t.Errorf("Retry-After = %d, want 1..%d", ra, maxWait)
	}

	if has["ietf"] {
		if got := r.Header.Get("RateLimit-Policy"); got != policy {
			t.Errorf("RateLimit-Policy = %q, want %q", got, policy)
		}
		items := parseSFList(t, "RateLimit", r.Header.Get("RateLimit"))
		if len(items) != 1 {
			t.Fatalf("RateLimit = %q, want one item", r.Header.Get("RateLimit"))
		}
		it := items[0]
		if !strings.Contains(policy, `"`+it.Name+`"`) {
			t.Errorf("RateLimit names %q, which is not an item of RateLimit-Policy %q", it.Name, policy)
		}
		if it.Params["r"] != w.remaining {
			t.Errorf("RateLimit r = %d, want %d (%q)", it.Params["r"], w.remaining, r.Header.Get("RateLimit"))
		}
		tt, ok := it.Params["t"]
		if !ok || tt < 0 || tt > maxWait {
			t.Errorf("RateLimit t = %d (present %v), want 0..%d", tt, ok, maxWait)
		}
		if w.denied {
			if tt < 1 {
				t.Errorf("denied with RateLimit t = %d, want ≥ 1", tt)
			}
			if raOK && ra < tt {
				t.Errorf("Retry-After %d is earlier than RateLimit t=%d", ra, tt)
			}
		}
	} else if r.Header.Get("RateLimit") != "" || r.Header.Get("RateLimit-Policy") != "" {
		t.Errorf("ietf headers sent without being configured: %s", r)
	}

	if has["legacy"] {
		expectInt(t, r, "RateLimit-Limit", w.limit, w.limit)
		expectInt(t, r, "RateLimit-Remaining", w.remaining, w.remaining)
		lo := int64(0)
		if w.denied {
			lo = 1
		}
		expectInt(t, r, "RateLimit-Reset", lo, maxWait)
	} else {
		for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
			if r.Header.Get(h) != "" {
				t.Errorf("%s sent without legacy being configured", h)
			}
		}
	}

	if has["x"] {
		expectInt(t, r, "X-RateLimit-Limit", w.limit, w.limit)
		expectInt(t, r, "X-RateLimit-Remaining", w.remaining, w.remaining)
		expectInt(t, r, "X-RateLimit-Reset", now-1, now+maxWait+2) // Unix time
	} else {
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if r.Header.Get(h) != "" {
				t.Errorf("%s sent without x being configured", h)
			}
		}
	}
}

// expectInt checks that header h is one integer in [lo, hi].
func expectInt(t testing.TB, r *response, h string, lo, hi int64) {
	t.Helper()
	vs := r.Header.Values(h)
	if len(vs) != 1 {
		t.Errorf("%s: %d values %q, want one", h, len(vs), vs)
		return
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < lo || n > hi {
		t.Errorf("%s = %q, want an integer in %d..%d", h, vs[0], lo, hi)
	}
}

// check429Body checks the problem body of a rate-limit denial (README, "Responses").
func check429Body(t testing.TB, r *response, violated ...string) *problem {
	t.Helper()
	p := r.problem(t, http.StatusTooManyRequests)
	if p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" {
		t.Errorf("problem type %q", p.Type)
	}
	if p.Title != "Too Many Requests" {
		t.Errorf("problem title %q", p.Title)
	}
	if fmt.Sprint(p.ViolatedPolicies) != fmt.Sprint(violated) {
		t.Errorf("violated-policies = %q, want %q", p.ViolatedPolicies, violated)
	}
	if ra, ok := r.retryAfter(t); ok {
		if p.RetryAfter == nil || *p.RetryAfter != ra {
			t.Errorf("body retry_after = %v, want %d as in Retry-After", deref(p.RetryAfter), ra)
		}
	}
	return p
}

func deref(p *int64) any {
	if p == nil {
		return "absent"
	}
	return *p
}

// avoidWindowEdge waits until the current aligned window of length w has
// at least 3 s left, so that a short test never straddles two windows.
func avoidWindowEdge(w time.Duration) {
	left := w - time.Duration(time.Now().UnixNano()%int64(w))
	if left < 3*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}

// TestHeaderStyles: three requests of a 3/minute limit are forwarded with
// the configured header styles counting down, the fourth is a 429 with
// Retry-After, r=0 and the problem body, and is not forwarded.
func TestHeaderStyles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		emit []string
	}{
		{"ietf", []string{"ietf"}},
		{"legacy", []string{"legacy"}},
		{"x", []string{"x"}},
		{"all", []string{"ietf", "legacy", "x"}},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			emit := "[]"
			if len(tc.emit) > 0 {
				emit = `["` + strings.Join(tc.emit, `", "`) + `"]`
			}
			g := startGateway(t, "headers.toml.tmpl", gwOpts{Data: map[string]any{
				"Emit": emit, "Rates": `["3/minute"]`, "Algorithm": "sliding_window_log", "Upstream": up.URL,
			}})
			c := newClient(t, "")
			const policy = `"per-client";q=3;w=60`
			for i := int64(1); i <= 3; i++ {
				r := get(t, c, g.url("/api/thing"), nil)
				if r.Status != http.StatusOK {
					t.Fatalf("request %d: %s", i, r)
				}
				r.echo(t)
				checkStyles(t, r, tc.emit, policy, want{limit: 3, window: 60, remaining: 3 - i})
			}
			r := get(t, c, g.url("/api/thing"), nil)
			checkStyles(t, r, tc.emit, policy, want{limit: 3, window: 60, remaining: 0, denied: true})
			p := check429Body(t, r, "per-client")
			ra, _ := r.retryAfter(t)
			if want := fmt.Sprintf("rate limit %q exceeded; retry in %ds", "per-client", ra); p.Detail != want {
				t.Errorf("detail = %q, want %q", p.Detail, want)
			}
			if n := up.count(); n != 3 {
				t.Errorf("upstream received %d requests, want 3 (a 429 is not forwarded)", n)
			}
		})
	}
}

// TestEveryAlgorithm runs the 200, 200, 200, 429 sequence of a 3-per-window
// limit with every rate algorithm on the memory store.
func TestEveryAlgorithm(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"fixed_window", "fixed_window_elastic", "sliding_window_log",
		"sliding_window_counter", "token_bucket", "gcra"} {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			g := startGateway(t, "headers.toml.tmpl", gwOpts{Data: map[string]any{
				"Emit": `["ietf"]`, "Rates": `["3/hour"]`, "Algorithm": alg, "Upstream": up.URL,
			}})
			c := newClient(t, "")
			avoidWindowEdge(time.Hour)
			const policy = `"per-client";q=3;w=3600`
			maxWait := int64(3600)
			if alg == "sliding_window_counter" {
				maxWait = 2 * 3600
			}
			for i := int64(1); i <= 3; i++ {
				r := get(t, c, g.url("/api"), nil)
				if r.Status != http.StatusOK {
					t.Fatalf("request %d: %s", i, r)
				}
				checkStyles(t, r, []string{"ietf"}, policy, want{limit: 3, window: 3600, remaining: 3 - i, maxWait: maxWait})
			}
			r := get(t, c, g.url("/api"), nil)
			check429Body(t, r, "per-client")
			checkStyles(t, r, []string{"ietf"}, policy, want{limit: 3, window: 3600, denied: true, maxWait: maxWait})
		})
	}
}

// TestMultiWindowPolicy: a limit with two rates is two items of
// RateLimit-Policy with unique names, byte-identical on every response;
// RateLimit names the one closest to exhaustion.
func TestMultiWindowPolicy(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "headers.toml.tmpl", gwOpts{Data: map[string]any{
		"Emit": `["ietf"]`, "Rates": `["3/minute", "100/hour"]`, "Algorithm": "sliding_window_log", "Upstream": up.URL,
	}})
	c := newClient(t, "")
	var first string
	for i := int64(1); i <= 4; i++ {
		r := get(t, c, g.url("/api"), nil)
		pol := r.Header.Get("RateLimit-Policy")
		if i == 1 {
			first = pol
			items := parseSFList(t, "RateLimit-Policy", pol)
			if len(items) != 2 {
				t.Fatalf("RateLimit-Policy = %q, want one item per window", pol)
			}
			if items[0].Name == items[1].Name {
				t.Errorf("RateLimit-Policy item names are not unique: %q", pol)
			}
			byQuota := map[int64]sfItem{}
			for _, it := range items {
				if !strings.HasPrefix(it.Name, "per-client") {
					t.Errorf("item %q does not carry the limit's name", it.Name)
				}
				byQuota[it.Params["q"]] = it
			}
			if byQuota[3].Params["w"] != 60 || byQuota[100].Params["w"] != 3600 {
				t.Errorf("RateLimit-Policy = %q, want q=3;w=60 and q=100;w=3600", pol)
			}
			first = pol
			minute := byQuota[3].Name
			rl := parseSFList(t, "RateLimit", r.Header.Get("RateLimit"))
			if rl[0].Name != minute || rl[0].Params["r"] != 2 {
				t.Errorf("RateLimit = %q, want the minute window %q with r=2", r.Header.Get("RateLimit"), minute)
			}
		} else if pol != first {
			t.Errorf("RateLimit-Policy changed between responses: %q then %q", first, pol)
		}
		if i == 4 {
			check429Body(t, r, "per-client")
			rl := parseSFList(t, "RateLimit", r.Header.Get("RateLimit"))
			if rl[0].Params["r"] != 0 || !strings.Contains(first, `"`+rl[0].Name+`";q=3;`) {
				t.Errorf("429 RateLimit = %q, want the minute window with r=0", r.Header.Get("RateLimit"))
			}
		} else if r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
	}
}

// TestLayeredLimits: a request denied by the route's limit
// is not counted by the gateway-wide one, and vice versa.
func TestLayeredLimits(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "layered.toml.tmpl", gwOpts{})
	c := newClient(t, "")
	step := func(t *testing.T, path, key, cost string, status int, violated ...string) {
		t.Helper()
		h := map[string]string{"X-API-Key": key}
		if cost != "" {
			h["X-Cost"] = cost
		}
		r := get(t, c, g.url(path), h)
		if r.Status != status {
			t.Fatalf("%s key=%s cost=%s: got %s, want %d", path, key, cost, r, status)
		}
		if status == http.StatusTooManyRequests {
			check429Body(t, r, violated...)
		}
	}
	t.Run("route denies, global not counted", func(t *testing.T) {
		step(t, "/a", "k1", "", 200)
		step(t, "/a", "k1", "", 200)
		step(t, "/a", "k1", "", 429, "route-a") // global stays at 2 of 5
		step(t, "/b", "k1", "", 200)
		step(t, "/b", "k1", "", 200)
		step(t, "/b", "k1", "", 200) // global 5 of 5: the denied request took nothing
		step(t, "/b", "k1", "", 429, "global")
	})
	t.Run("global denies, route not counted", func(t *testing.T) {
		step(t, "/a", "k2", "4", 200)           // global 4/5, route-a 1/2
		step(t, "/a", "k2", "2", 429, "global") // would make global 6; route-a must not count it
		step(t, "/a", "k2", "1", 200)           // global 5/5, route-a 2/2: only if the denial took nothing
		step(t, "/a", "k2", "1", 429, "global", "route-a")
	})
}

// TestCost: a malformed cost header is a 400 that counts
// nothing; a cost above the capacity is a 429 without Retry-After; a cost
// of c takes c units.
func TestCost(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "cost.toml.tmpl", gwOpts{})
	c := newClient(t, "")
	units := func(cost string) *response {
		t.Helper()
		return get(t, c, g.url("/units"), map[string]string{"X-Request-Cost": cost})
	}
	for _, bad := range []string{"-1", "0", "1.5", "abc", "NaN", "1e3", "0x10", "9007199254740993",
		"99999999999999999999999999", "3 3", "-9223372036854775808"} {
		r := units(bad)
		if r.Status != http.StatusBadRequest {
			t.Errorf("cost %q: got %s, want 400", bad, r)
			continue
		}
		r.problem(t, http.StatusBadRequest)
	}
	r := units("4")
	if r.Status != 200 {
		t.Fatalf("cost 4: %s", r)
	}
	checkStyles(t, r, []string{"ietf"}, `"units";q=10;w=60`, want{limit: 10, window: 60, remaining: 6})

	for _, over := range []string{"11", "9007199254740992"} {
		r = units(over)
		p := check429Body(t, r, "units")
		if _, ok := r.retryAfter(t); ok {
			t.Errorf("cost %s > capacity 10: Retry-After %q promises a retry that can never succeed", over, r.Header.Get("Retry-After"))
		}
		if p.RetryAfter != nil && *p.RetryAfter != 0 {
			t.Errorf("cost %s > capacity: body retry_after = %d, want none", over, *p.RetryAfter)
		}
		if p.Detail == "" {
			t.Errorf("cost %s > capacity: the body does not say why", over)
		}
	}
	r = units("6") // exactly the rest: nothing above was counted
	if r.Status != 200 {
		t.Fatalf("cost 6 after 4 (and only rejected requests): %s", r)
	}
	checkStyles(t, r, []string{"ietf"}, `"units";q=10;w=60`, want{limit: 10, window: 60, remaining: 0})
	r = units("1")
	check429Body(t, r, "units")
	if ra, ok := r.retryAfter(t); !ok || ra < 1 {
		t.Errorf("cost 1 on a full window: Retry-After %q, want ≥ 1", r.Header.Get("Retry-After"))
	}
	r = get(t, c, g.url("/units"), nil) // no header: the static cost 1
	check429Body(t, r, "units")

	// Static cost 4 of 10.
	for i, rem := range []int64{6, 2} {
		r := get(t, c, g.url("/static"), nil)
		if r.Status != 200 {
			t.Fatalf("static request %d: %s", i+1, r)
		}
		checkStyles(t, r, []string{"ietf"}, `"static";q=10;w=60`, want{limit: 10, window: 60, remaining: rem})
	}
	r = get(t, c, g.url("/static"), nil)
	check429Body(t, r, "static")
	if _, ok := r.retryAfter(t); !ok {
		t.Errorf("static cost 4 with 2 left: want Retry-After: %s", r)
	}
}

// TestShadowNeverDenies: a shadow limit counts and logs but never denies,
// and is not in the response headers.
func TestShadowNeverDenies(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "shadow.toml.tmpl", gwOpts{})
	c := newClient(t, "")
	for i := int64(1); i <= 10; i++ {
		r := get(t, c, g.url("/s"), nil)
		if r.Status != 200 {
			t.Fatalf("request %d: a shadow limit of 2/minute denied: %s", i, r)
		}
		checkStyles(t, r, []string{"ietf"}, `"enforced";q=10;w=60`, want{limit: 10, window: 60, remaining: 10 - i})
	}
	r := get(t, c, g.url("/s"), nil)
	check429Body(t, r, "enforced")
	// A shadow limit is reported in logs.
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(g.output(), `"candidate"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line names the shadow limit \"candidate\" after it was exceeded 8 times")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExemptClients: exempt IPs and exempt API keys are never limited;
// everyone else is.
func TestExemptClients(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "identity.toml.tmpl", gwOpts{
		// A trusted proxy no request comes from: user_header needs one.
		Data: map[string]any{"Upstream": up.URL, "Trusted": `["192.0.2.1/32"]`, "ExemptIPs": `["127.0.0.2/32"]`},
		Env:  []string{"E2E_EXEMPT_KEYS=vip-1,vip-2"},
	})
	exempt, plain := newClient(t, "127.0.0.2"), newClient(t, "127.0.0.1")
	seq := func(c *http.Client, hdr map[string]string, want ...int) {
		t.Helper()
		for i, w := range want {
			r := get(t, c, g.url("/api"), hdr)
			if r.Status != w {
				t.Fatalf("request %d with %v: got %s, want %d", i+1, hdr, r, w)
			}
		}
	}
	seq(exempt, nil, 200, 200, 200, 200, 200)
	seq(plain, nil, 200, 200, 429)
	seq(plain, map[string]string{"X-API-Key": "vip-2"}, 200, 200, 200, 200, 200)
	seq(plain, map[string]string{"X-API-Key": "nobody"}, 200, 200, 429)
}
