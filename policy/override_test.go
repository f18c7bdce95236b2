package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// TestCompileOverrides: a stored override applies while its limit exists
// with the key parts it was made for and its numbers fit; otherwise it is
// listed with the reason and applies nowhere. Expiry is judged at Find.
func TestCompileOverrides(t *testing.T) {
	p, err := Compile(base(), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	o := p.CompileOverrides([]ratelimit.Override{ok, gone, moved, unfit, nobody})
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
	other := p.CompileOverrides([]ratelimit.Override{{Limit: "per-client", Subject: "key:K", Scope: l.Scope, Rates: rates("50/s"), Expires: exp}})
	if ov := other.For(l).Find(exp.Add(-time.Hour), "", "K"); ov == nil || ov.Limit.ID == l.ID {
		t.Errorf("an override with other windows: %+v, want its own ID (its own counters)", ov)
	}
	if o.For(p.Limit("search")) != nil {
		t.Error("a limit without overrides has some")
	}
}

// TestOverrideRateOrder: an override listing the limit's windows in
// another order counts in the limit's counters (its windows sorted, as
// the limit's are), and a problem with one of its rates (or a plan's) names
// the rate where it is listed.
func TestOverrideRateOrder(t *testing.T) {
	c := base()
	c.Limits[0].Cost = 5 // per-client: 10/second, 600/minute
	p, err := Compile(c, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limit("per-client")
	v, errs := l.OverrideLimit(OverrideNumbers{Rates: []string{"3000/minute", "50/second"}})
	if len(errs) > 0 || v.ID != l.ID || v.Rates[0].Limit != 50 {
		t.Errorf("override minute first: %v %v, want the limit's ID %s, second first", v, errs, l.ID)
	}
	_, errs = l.OverrideLimit(OverrideNumbers{Rates: []string{"3000/minute", "2/second"}})
	if len(errs) != 1 || errs[0].Field != "rates[1]" {
		t.Errorf("a capacity below the cost in the second listed rate: %v, want rates[1]", errs)
	}
	// The same for a plan's rates.
	c.Plans = []config.PlanConfig{{Name: "pro"}}
	c.Limits[0].PlanRates = map[string][]string{"pro": {"600/minute", "2/second"}}
	if _, err := Compile(c, noEnv, nil); err == nil || !strings.Contains(err.Error(), "limits[0].plan_rates.pro[1]: cost 5 exceeds capacity 2") {
		t.Errorf("a plan's second listed rate below the cost: %v, want it named plan_rates.pro[1]", err)
	}
}
