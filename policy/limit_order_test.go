package policy

import (
	"os"
	"strings"
	"testing"
)

// TestLimitRatesOrder: a limit's counters do not depend on the order its
// rates are listed in. A reload that only reorders them ("100/month",
// "2/minute" against "2/minute", "100/month"; a quota's periods) compiles
// to the same ID, so every client keeps its usage; a changed window gives
// another ID. A cost error still names the rate as the configuration
// spells it.
func TestLimitRatesOrder(t *testing.T) {
	id := func(alg string, rates ...string) string {
		t.Helper()
		c := base()
		c.Limits[0].Algorithm, c.Limits[0].Rates = alg, rates
		p, err := Compile(c, noEnv, os.ReadFile)
		if err != nil {
			t.Fatalf("%s %v: %v", alg, rates, err)
		}
		return p.Limits[0].ID
	}
	for _, tc := range []struct {
		alg  string
		a, b []string
		same bool
	}{
		{"fixed_window", []string{"2/minute", "100/day"}, []string{"100/day", "2/minute"}, true},
		{"sliding_window_log", []string{"1/second", "5/minute", "100/hour"}, []string{"100/hour", "1/second", "5/minute"}, true},
		{"quota", []string{"2/day", "100/month"}, []string{"100/month", "2/day"}, true},
		{"quota", []string{"2/day", "10/week", "100/month"}, []string{"100/month", "2/day", "10/week"}, true},
		{"fixed_window", []string{"2/minute", "100/day"}, []string{"2/minute", "100/hour"}, false},
		{"fixed_window", []string{"2/minute", "100/day"}, []string{"2/minute"}, false},
		{"quota", []string{"2/day", "100/month"}, []string{"2/week", "100/month"}, false},
	} {
		if got := id(tc.alg, tc.a...) == id(tc.alg, tc.b...); got != tc.same {
			t.Errorf("%s %v and %v: same ID %v, want %v", tc.alg, tc.a, tc.b, got, tc.same)
		}
	}

	c := base()
	c.Limits[0].Rates, c.Limits[0].Cost = []string{"100/day", "2/minute"}, 3
	_, err := Compile(c, noEnv, os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), `limits[0].cost: 3 exceeds capacity 2 of rate "2/minute"`) {
		t.Errorf("cost above the second listed rate: %v; want the error naming \"2/minute\"", err)
	}
}
