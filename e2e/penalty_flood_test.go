package e2e

import (
	"fmt"
	"strconv"
	"testing"
)

// TestPenaltyBoxSurvivesKeyFlood: on a memory store bounded to 64 keys, a
// client denied by a limit with a one-hour penalty stays in the box after
// 2,000 fresh keys (far more than the store holds) each sent a request on
// the same limit. The flood evicts ordinary counters (the metrics count
// the evictions); the penalty box is kept with the quota states and
// evicted only when nothing else can be. (It once went like any counter,
// and the client's next request was allowed.)
func TestPenaltyBoxSurvivesKeyFlood(t *testing.T) {
	t.Parallel()
	body := `[[limits]]
name = "login"
algorithm = "fixed_window"
rates = ["2/minute"]
penalty = "1h"
by = ["client"]

[[routes]]
name = "login"
path_prefix = "/login"
respond = { status = 200, body = "ok" }
limits = ["login"]
`
	g := startGateway(t, "memkeys.toml.tmpl", gwOpts{Data: map[string]any{"MaxKeys": 64, "Redis": "", "Body": body}})
	c := newClient(t, "")
	abuser := map[string]string{"X-API-Key": "abuser"}
	for i := range 2 {
		if r := get(t, c, g.url("/login"), abuser); r.Status != 200 {
			t.Fatalf("request %d: %s", i+1, r)
		}
	}
	if r := get(t, c, g.url("/login"), abuser); r.Status != 429 || r.Header.Get("Retry-After") != "3600" {
		t.Fatalf("third request: %s; want 429 starting the penalty (Retry-After 3600)", r)
	}
	for i := range 2000 {
		if r := get(t, c, g.url("/login"), map[string]string{"X-API-Key": fmt.Sprint("flood-", i)}); r.Status != 200 {
			t.Fatalf("flood request %d: %s", i, r)
		}
	}
	var evicted float64
	for _, v := range scrape(t, g, "").family("tollgate_store_memory_evictions_total") {
		evicted += v
	}
	if evicted < 1000 {
		t.Fatalf("%v evictions after 2,000 fresh keys on a store of 64: the flood did not overflow the store", evicted)
	}
	r := get(t, c, g.url("/login"), abuser)
	if r.Status != 429 {
		t.Fatalf("the boxed client after the flood: %s; want still denied by its penalty", r)
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 3000 || ra > 3600 {
		t.Errorf("the boxed client after the flood: Retry-After %q, want the penalty's time left (about 3600)", r.Header.Get("Retry-After"))
	}
}
