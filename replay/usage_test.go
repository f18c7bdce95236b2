package replay

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy/config"
)

// TestRunCountsLoggedUsage: a token budget is replayed with each line's
// logged units as the upstream's usage: against 1000 tokens, lines of
// 300 are admitted while the budget has room for their reservation (the
// request's cost, 1: a replayed request has no body), the fourth settles
// past the budget, and the fifth and sixth are denied. A line that
// logged units for another limit counts those; a line without units
// keeps its reservation. (With no units in the log, every line would
// count 1 and all six be admitted.)
func TestRunCountsLoggedUsage(t *testing.T) {
	c := config.Default()
	budget := config.DefaultLimit()
	budget.Name, budget.Rates, budget.Algorithm, budget.By = "tokens", []string{"1000/1h"}, "fixed_window", []string{"ip"}
	budget.Count, budget.CostRequestJSON, budget.CostResponseJSON = "response", "max_tokens", "usage.total_tokens"
	c.Limits = []config.LimitConfig{budget}
	web := config.DefaultRoute()
	web.Name, web.PathPrefix, web.Upstream, web.Limits = "llm", "/v1", "http://127.0.0.1:1", []string{"tokens"}
	c.Routes = []config.RouteConfig{web}
	p := compile(t, c)
	var es []accesslog.Entry
	for i, u := range []accesslog.Units{{Limit: "tokens", N: 300}, {Limit: "old-budget", N: 300}, {Limit: "tokens", N: 300},
		{Limit: "tokens", N: 300}, {Limit: "tokens", N: 300}, {Limit: "tokens", N: 300}} {
		e := entry(time.Duration(i)*time.Second, "198.51.100.7", "", "llm", "/v1/chat")
		e.Status, e.Units = 200, []accesslog.Units{u}
		es = append(es, e)
	}
	replayEachFormat(t, p, es, func(t *testing.T, rep *Report) {
		lr := limitReport(t, rep, "tokens")
		if lr.Allowed != 4 || lr.Denied != 2 {
			t.Fatalf("allowed %d, denied %d; want 4 and 2", lr.Allowed, lr.Denied)
		}
	})
}
