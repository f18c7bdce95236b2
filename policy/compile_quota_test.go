package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestQuotaCounterBound: a quota answer over routes whose limits would
// read more than maxQuotaCounters counters is refused; a limit shared by
// every route counts once, one keyed by route once per route.
func TestQuotaCounterBound(t *testing.T) {
	build := func(routes int, by []string) error {
		c := base()
		l := config.DefaultLimit()
		l.Name, l.Rates, l.By = "each", []string{"5/s"}, by
		c.Limits = append(c.Limits, l)
		c.Gateway.Limits = nil // one more counter, counted once
		c.Routes = c.Routes[:1]
		c.Routes[0].Limits = []string{"each"}
		for i := range routes - 1 {
			rt := config.DefaultRoute()
			rt.Name, rt.PathPrefix, rt.Limits = fmt.Sprintf("r%d", i), fmt.Sprintf("/r%d", i), []string{"each"}
			rt.Respond = &config.RespondConfig{Body: "ok"}
			c.Routes = append(c.Routes, rt)
		}
		q := config.DefaultRoute()
		q.Name, q.PathPrefix, q.Respond = "quota", "/rate_limit", &config.RespondConfig{Quota: true}
		c.Routes = append(c.Routes, q)
		_, err := Compile(c, noEnv, nil)
		return err
	}
	// No limit on the quota route itself: valid, with a warning.
	c := base()
	q := config.DefaultRoute()
	q.Name, q.PathPrefix, q.Respond = "quota", "/rate_limit", &config.RespondConfig{Quota: true}
	c.Gateway.Limits, c.Routes = nil, append(c.Routes, q)
	c.Server.AdminListen = "" // nor the warning of an admin listener without a token
	p, err := Compile(c, noEnv, nil)
	if err != nil || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], `quota route "quota" has no limit`) {
		t.Errorf("a quota route without limits: %v, warnings %q; want one warning", err, p.Warnings)
	}
	if err := build(100, []string{"client"}); err != nil {
		t.Errorf("100 routes sharing one per-client limit: %v", err)
	}
	if err := build(maxQuotaCounters, []string{"client", "route"}); err != nil {
		t.Errorf("%d routes with a per-route limit: %v", maxQuotaCounters, err)
	}
	err = build(maxQuotaCounters+1, []string{"client", "route"})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("respond.routes: a quota answer would read %d counters, more than %d", maxQuotaCounters+1, maxQuotaCounters)) {
		t.Errorf("%d routes with a per-route limit: %v, want the bound", maxQuotaCounters+1, err)
	}
}
