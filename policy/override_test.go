package policy

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

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
