package override_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// tablePolicy has a limit keyed by client with two windows (per-client:
// 10/second, 600/minute) and one keyed by client and route (search).
func tablePolicy(t *testing.T) *policy.Policy {
	return policytest.Compile(t, func(c *config.Config) {
		pc := config.DefaultLimit()
		pc.Name, pc.Rates = "per-client", []string{"10/second", "600/minute"}
		search := config.DefaultLimit()
		search.Name, search.Rates, search.Algorithm, search.By = "search", []string{"100/minute"}, "sliding_window_log", []string{"client", "route"}
		c.Limits = []config.LimitConfig{pc, search}
		rt := config.DefaultRoute()
		rt.Name, rt.Limits, rt.Respond = "demo", []string{"per-client", "search"}, &config.RespondConfig{Body: "ok"}
		c.Routes = []config.RouteConfig{rt}
	})
}

// TestCompile: a stored override applies while its limit exists
// with the key parts it was made for and its numbers fit; otherwise it is
// listed with the reason and applies nowhere. Expiry is judged at Find.
func TestCompile(t *testing.T) {
	p := tablePolicy(t)
	l := p.Limit("per-client")
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rates := func(ss ...string) []ratelimit.Rate {
		var rs []ratelimit.Rate
		for _, s := range ss {
			r, err := ratelimit.ParseRate(s)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		return rs
	}
	// The limit's windows (1s and 1m) with other counts: the same ID.
	ok := ratelimit.Override{Limit: "per-client", Subject: "key:K", Scope: l.Scope, Rates: rates("50/s", "3000/m"), Expires: exp}
	gone, moved, unfit, nobody := ok, ok, ok, ok
	gone.Limit = "removed"
	moved.Scope = "by=ip;missing=0"
	unfit.Rates, unfit.MaxInFlight = nil, 3
	nobody.Subject = "consumer:nobody"
	o := override.Compile(p, []ratelimit.Override{ok, gone, moved, unfit, nobody})
	want := []string{"", "no limit of that name", "key parts changed", "numbers no longer fit", "no consumer of that name"}
	for i, st := range o.All {
		if (want[i] == "") != (st.Problem == "") || !strings.Contains(st.Problem, want[i]) {
			t.Errorf("override %d: problem %q, want %q", i, st.Problem, want[i])
		}
	}
	lo := o.For(l)
	if lo == nil || !lo.NeedsSubject() {
		t.Fatal("the valid override is not compiled")
	}
	if ov := lo.Find(exp.Add(-time.Microsecond), "", "K"); ov == nil || ov.Limit.Rates[0].Limit != 50 || ov.Limit.ID != l.ID {
		t.Errorf("Find before expiry: %+v, want 50/s with the limit's ID", ov)
	}
	if ov := lo.Find(exp, "", "K"); ov != nil {
		t.Errorf("Find at expiry: %+v, want none", ov)
	}
	if ov := lo.Find(exp.Add(-time.Hour), "", "other"); ov != nil {
		t.Errorf("Find for another subject: %+v", ov)
	}
	other := override.Compile(p, []ratelimit.Override{{Limit: "per-client", Subject: "key:K", Scope: l.Scope, Rates: rates("50/s"), Expires: exp}})
	if ov := other.For(l).Find(exp.Add(-time.Hour), "", "K"); ov == nil || ov.Limit.ID == l.ID {
		t.Errorf("an override with other windows: %+v, want its own ID (its own counters)", ov)
	}
	if o.For(p.Limit("search")) != nil {
		t.Error("a limit without overrides has some")
	}
}
