package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// respCountUpstream answers every request 200 with the units it says it
// used in X-Used (the request's X-Want, default 7), as a metered API
// reports its usage, after the request's X-Sleep.
func respCountUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := r.Header.Get("X-Want")
		if used == "" {
			used = "7"
		}
		if d, err := time.ParseDuration(r.Header.Get("X-Sleep")); err == nil {
			time.Sleep(d)
		}
		w.Header().Set("X-Used", used)
		w.WriteHeader(200)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestUsageExportCountsByResponse: a limit with count = "response" and
// cost_response_header counts what the upstream reported once it
// answered; the export must hold those units, not the request's peek
// (which counts nothing) — the units a metered API bills by.
func TestUsageExportCountsByResponse(t *testing.T) {
	sink := startSink(t, mustListen(t), nil)
	up := newUpstream(t)
	meter := respCountUpstream(t)
	extra := fmt.Sprintf(`
[[limits]]
name = "metered"
by = ["consumer"]
rates = ["100000/hour"]
count = "response"
cost_response_header = "X-Used"

[[routes]]
name = "llm"
path_prefix = "/llm"
upstream = "%s"
limits = ["metered"]
`, meter.URL)
	g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://"+sink.addr+"/", up, "Extra", extra)})
	c := &http.Client{Timeout: 10 * time.Second}
	var want int64
	for i := range 5 {
		used := int64(10 + i)
		r := get(t, c, g.url("/llm/chat"), map[string]string{"X-API-Key": "acme-key", "X-Want": strconv.FormatInt(used, 10)})
		if r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
		want += used
	}
	g.stop(t)
	if got := sink.totals()["acme/metered"]; got != want {
		t.Errorf("receiver holds %d units of the response-counted limit, the upstream reported %d", got, want)
	}
}

// TestUsageExportResponseCountedPeriod: a monthly quota in New York
// counted by response; a request decided seconds before local midnight
// of March 1 is answered after it, so the store counts its units in
// March (the quota endpoint shows them there). The export must put them
// in March too: a bill that put them in February would disagree with
// the quota the consumer was held to.
func TestUsageExportResponseCountedPeriod(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		midnight := time.Date(2025, 3, 1, 0, 0, 0, 0, ny)
		off := time.Until(midnight.Add(-4 * time.Second))
		fake := func() time.Time { return time.Now().Add(off) }
		sink := startSink(t, mustListen(t), nil)
		up := newUpstream(t)
		meter := respCountUpstream(t)
		extra := fmt.Sprintf(`
[[limits]]
name = "metered"
by = ["consumer"]
algorithm = "quota"
rates = ["1000/month"]
timezone = "America/New_York"
count = "response"
cost_response_header = "X-Used"

[[routes]]
name = "llm"
path_prefix = "/llm"
upstream = "%s"
limits = ["metered"]

[[routes]]
name = "budget"
path_prefix = "/rate_limit"
respond = { quota = true, routes = ["llm"] }
`, meter.URL)
		g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://"+sink.addr+"/", up, "Extra", extra, "Redis", redis,
			"Clock", "local"),
			Env: []string{clockSkewEnv + "=" + off.String()}})
		c := &http.Client{Timeout: 30 * time.Second}
		key := "acme-key"
		left := midnight.Sub(fake())
		if left < time.Second {
			t.Fatalf("the gateway took until %s before midnight to start (machine overloaded)", left)
		}
		r := get(t, c, g.url("/llm/chat"), map[string]string{"X-API-Key": key, "X-Want": "40",
			"X-Sleep": (left + 500*time.Millisecond).String()})
		if r.Status != 200 {
			t.Fatalf("request: %s", r)
		}
		if fake().Before(midnight) {
			t.Fatalf("answered before midnight")
		}
		qa := get(t, c, g.url("/rate_limit"), map[string]string{"X-API-Key": key})
		if !strings.Contains(string(qa.Body), `"remaining":960`) {
			t.Errorf("quota endpoint after midnight: %s; want the 40 units counted in March", qa)
		}
		g.stop(t)
		sink.mu.Lock()
		defer sink.mu.Unlock()
		var units int64
		for _, ev := range sink.byID {
			if ev.Type != "dev.tollgate.usage.v1" || ev.Data["limit"] != "metered" {
				continue
			}
			units += int64(ev.Data["units"].(float64))
			if ev.Data["period_start"] != "2025-03-01T05:00:00Z" {
				t.Errorf("record %v: want the units in March (New York), where the quota counted them", ev.Data)
			}
		}
		if units != 40 {
			t.Errorf("exported %d units, want 40", units)
		}
	})
}

// TestUsageExportDelayGivenBack: a delay limit (1/s) reserves a slot for
// a request that must wait; its client gives up during the wait, so the
// gateway gives the slot back (499, never forwarded). The export must
// hold the forwarded request's unit only: the store no longer counts the
// given-back one.
func TestUsageExportDelayGivenBack(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		sink := startSink(t, mustListen(t), nil)
		up := newUpstream(t)
		extra := `
[[limits]]
name = "paced"
by = ["consumer"]
algorithm = "token_bucket"
rates = ["1/2s"]
on_limit = "delay"
max_delay = "30s"

[[routes]]
name = "slow"
path_prefix = "/slow"
upstream = "` + up.URL + `"
limits = ["paced"]
`
		g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://"+sink.addr+"/", up, "Extra", extra, "Redis", redis)})
		c := &http.Client{Timeout: 10 * time.Second}
		if r := get(t, c, g.url("/slow/a"), map[string]string{"X-API-Key": "acme-key"}); r.Status != 200 {
			t.Fatalf("first request: %s", r)
		}
		impatient := &http.Client{Timeout: 300 * time.Millisecond}
		req, _ := http.NewRequest("GET", g.url("/slow/b"), nil)
		req.Header.Set("X-API-Key", "acme-key")
		if resp, err := impatient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("the second request was answered %d at once; want it to wait", resp.StatusCode)
		}
		// The given-back slot is free again: the next request waits no
		// longer than the first slot's refill (a hang guard, not a timing).
		if r := get(t, c, g.url("/slow/c"), map[string]string{"X-API-Key": "acme-key"}); r.Status != 200 {
			t.Fatalf("third request: %s", r)
		}
		g.stop(t)
		if got := sink.totals()["acme/paced"]; got != 2 {
			t.Errorf("receiver holds %d units of the delay limit; want 2 (two requests forwarded, one slot given back)", got)
		}
	})
}

// TestUsageExportIDsAcrossRestart: a gateway posts, stops, starts again
// with the same configuration and posts again. Every record id is new
// (a restarted process numbering its records from 1 again must not
// reuse the ids of its previous life, or a receiver deduplicating by id
// would throw the new units away): the receiver holds both lives' units.
func TestUsageExportIDsAcrossRestart(t *testing.T) {
	sink := startSink(t, mustListen(t), nil)
	up := newUpstream(t)
	data := usageData(t, "http://"+sink.addr+"/", up, "Limits", `"calls"`)
	c := &http.Client{Timeout: 10 * time.Second}
	book := ledger{}
	for range 2 {
		g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: data})
		book.send(t, c, g, "acme", "acme-key", 4)
		g.stop(t)
	}
	if got := sink.totals()["acme/calls"]; got != book["acme/calls"] {
		t.Errorf("receiver holds %d units, the two gateways admitted %d", got, book["acme/calls"])
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.dups != 0 {
		t.Errorf("%d events arrived with an id already seen", sink.dups)
	}
}

// TestUsageExportTokensBesideHeader: a route with a token budget read
// from the body and a limit counted by a response header; the export
// must hold each limit's own units (the body's 42 tokens, the header's
// 7), the two ways of counting after the answer reported side by side.
func TestUsageExportTokensBesideHeader(t *testing.T) {
	sink := startSink(t, mustListen(t), nil)
	up := newUpstream(t)
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Used", "7")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"text":"hi"}],"usage":{"total_tokens":42}}`)
	}))
	t.Cleanup(llm.Close)
	extra := fmt.Sprintf(`
[[limits]]
name = "tokens"
by = ["consumer"]
rates = ["100000/hour"]
count = "response"
cost_response_json = "usage.total_tokens"

[[limits]]
name = "metered"
by = ["consumer"]
rates = ["100000/hour"]
count = "response"
cost_response_header = "X-Used"

[[routes]]
name = "llm"
path_prefix = "/llm"
upstream = "%s"
limits = ["tokens", "metered"]
`, llm.URL)
	g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://"+sink.addr+"/", up, "Extra", extra)})
	c := &http.Client{Timeout: 10 * time.Second}
	for i := range 3 {
		if r := get(t, c, g.url("/llm/chat"), map[string]string{"X-API-Key": "acme-key"}); r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
	}
	g.stop(t)
	tot := sink.totals()
	if tot["acme/tokens"] != 3*42 || tot["acme/metered"] != 3*7 {
		t.Errorf("receiver holds tokens %d, metered %d; want %d and %d", tot["acme/tokens"], tot["acme/metered"], 3*42, 3*7)
	}
}
