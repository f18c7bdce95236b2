package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// budgetLimits is budget.toml.tmpl's body: one route per limit, each
// limit's numbers filled in from n (name → the TOML of its numbers), and a
// proxied route for the concurrency limit.
func budgetLimits(upstream string, n map[string]string) string {
	body := ""
	for _, name := range []string{"log", "bucket", "bucket-clamp", "gcra", "counter"} {
		alg := map[string]string{"log": "sliding_window_log", "bucket": "token_bucket",
			"bucket-clamp": "token_bucket", "gcra": "gcra", "counter": "sliding_window_counter"}[name]
		body += fmt.Sprintf("[[limits]]\nname = %q\nalgorithm = %q\nby = [\"client\"]\n%s\n\n", name, alg, n[name])
		body += routeTOML(name, "/"+name, name)
	}
	body += fmt.Sprintf("[[limits]]\nname = \"conc\"\nalgorithm = \"concurrency\"\nby = []\n%s\n\n", n["conc"])
	body += fmt.Sprintf("[[routes]]\nname = \"conc\"\npath_prefix = \"/conc\"\nupstream = %q\nlimits = [\"conc\"]\n", upstream)
	return body
}

// TestReloadKeepsUsage (issue: reloads hand out fresh budgets): a reload
// that changes a limit's counts, burst or max_in_flight keeps the usage
// counted so far and judges it by the new numbers, on the memory store and
// on Redis. Before, every changed limit started from zero: 2 requests in
// flight under max_in_flight = 2 plus 3 more admitted after raising it to
// 3, and every client got a fresh budget.
//
// Expected counts, by hand (windows of an hour or more, so nothing refills
// or expires during the test):
//   - log 5/hour, 4 used → 3/hour: 4 ≥ 3, none allowed (fresh: 3).
//   - counter 3/day, 3 used and a 4th denied → 4/day: exactly 1 more
//     (fresh: 4; the denial cached under 3/day: 0).
//   - token_bucket 10/hour burst 10, 8 taken → burst 5: 2 tokens left, 2
//     allowed (fresh: 5).
//   - token_bucket 10/hour burst 10, 3 taken → burst 5: 7 tokens clamp to
//     the new burst, 5 allowed (not 7).
//   - gcra 10/hour burst 10, 8 taken → burst 5: the debt of 8 emission
//     intervals exceeds the new tolerance, none allowed (fresh: 5).
//   - concurrency 2 → 3 with 2 in flight: exactly 1 more (fresh: 3).
func TestReloadKeepsUsage(t *testing.T) {
	t.Parallel()
	stores(t, testReloadKeepsUsage)
}

func testReloadKeepsUsage(t *testing.T, redisAddr string) {
	up := newUpstream(t)
	before := map[string]string{
		"log":          `rates = ["5/hour"]`,
		"counter":      `rates = ["3/day"]`,
		"bucket":       "rates = [\"10/hour\"]\nburst = 10",
		"bucket-clamp": "rates = [\"10/hour\"]\nburst = 10",
		"gcra":         "rates = [\"10/hour\"]\nburst = 10",
		"conc":         "max_in_flight = 2",
	}
	after := map[string]string{
		"log":          `rates = ["3/hour"]`,
		"counter":      `rates = ["4/day"]`,
		"bucket":       "rates = [\"10/hour\"]\nburst = 5",
		"bucket-clamp": "rates = [\"10/hour\"]\nburst = 5",
		"gcra":         "rates = [\"10/hour\"]\nburst = 5",
		"conc":         "max_in_flight = 3",
	}
	g := startGateway(t, "budget.toml.tmpl", gwOpts{Data: map[string]any{
		"Redis": redisAddr, "Body": budgetLimits(up.URL, before)}})
	c := newClient(t, "")
	key := map[string]string{"X-API-Key": "budget-client"}
	use := func(path string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if r := get(t, c, g.url(path), key); r.Status != 200 {
				t.Fatalf("before the reload, request %d to %s: %s", i+1, path, r)
			}
		}
	}
	avoidWindowEdge(24 * time.Hour)
	use("/log", 4)
	use("/counter", 3)
	// A denial now, which the Redis store caches until its Retry-After:
	// raising the limit must not leave that verdict standing.
	if r := get(t, c, g.url("/counter"), key); r.Status != 429 {
		t.Fatalf("before the reload, the 4th request to /counter (3/day): %s, want 429", r)
	}
	use("/bucket", 8)
	use("/bucket-clamp", 3)
	use("/gcra", 8)

	// Two requests held in flight on the shared concurrency limit.
	ctx, cancel := context.WithCancel(context.Background())
	var held sync.WaitGroup
	defer func() { cancel(); held.Wait() }()
	for i := 0; i < 2; i++ {
		held.Add(1)
		go func() {
			defer held.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", g.url("/conc/held"), nil)
			req.Header.Set(hSleep, "60s")
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		up.waitArrived(t, 10*time.Second)
	}

	rd := reloadAndWait(t, g, map[string]any{"Body": budgetLimits(up.URL, after)})
	if !rd.LastReload.OK {
		t.Fatalf("reload rejected: %+v", rd.LastReload)
	}

	allowed := func(path string, n int) int {
		ok := 0
		for i := 0; i < n; i++ {
			switch r := get(t, c, g.url(path), key); r.Status {
			case 200:
				ok++
			case 429:
			default:
				t.Fatalf("after the reload, %s: %s", path, r)
			}
		}
		return ok
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/log", 0}, {"/counter", 1}, {"/bucket", 2}, {"/bucket-clamp", 5}, {"/gcra", 0},
	} {
		if got := allowed(tc.path, 8); got != tc.want {
			t.Errorf("after the reload, %s allowed %d of 8, want %d", tc.path, got, tc.want)
		}
	}

	// Three more requests at once with two still held: exactly one fits
	// under max_in_flight = 3.
	statuses := make(chan int, 3)
	for i := 0; i < 3; i++ {
		go func() {
			r, err := tryDo(c, "GET", g.url("/conc/more"), map[string]string{hSleep: "2s"}, nil)
			if err != nil {
				statuses <- -1
				return
			}
			statuses <- r.Status
		}()
	}
	got := map[int]int{}
	for i := 0; i < 3; i++ {
		got[<-statuses]++
	}
	if got[200] != 1 || got[429] != 2 {
		t.Errorf("with 2 in flight after raising max_in_flight 2 → 3, 3 more requests got %v, want 1×200 and 2×429", got)
	}
}
