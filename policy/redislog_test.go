package policy

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestRedisLogBound: on the Redis store, a sliding_window_log whose
// limits add up to more than maxRedisLogUnits is refused wherever its
// numbers come from (the limit, a plan's rates, an override), naming the
// field and the bound; at the bound, on the memory store, and for any
// other algorithm it is accepted. The hostile inputs are the large and
// the many-windowed logs an operator (or an admin API caller) may ask
// for.
func TestRedisLogBound(t *testing.T) {
	const bound = "at most 1000 (entries per key)"
	for _, tc := range []struct {
		name      string
		backend   string
		algorithm string
		rates     []string
		planRates []string
		want      string // a substring of the error; "" for none
	}{
		{"at the bound", "redis", "sliding_window_log", []string{"1000/hour"}, nil, ""},
		{"one over", "redis", "sliding_window_log", []string{"1001/hour"}, nil, "limits[1].rates: on the Redis store"},
		{"the largest the memory store accepts", "redis", "sliding_window_log", []string{"4000000/day"}, nil, bound + ", got 4000000"},
		{"windows add up", "redis", "sliding_window_log", []string{"600/minute", "600/hour"}, nil, bound + ", got 1200"},
		{"a plan's rates", "redis", "sliding_window_log", []string{"100/hour"}, []string{"5000/hour"}, "limits[1].plan_rates.gold: on the Redis store"},
		{"memory store keeps its own bound", "memory", "sliding_window_log", []string{"4000000/day"}, []string{"4000000/day"}, ""},
		{"another algorithm on Redis", "redis", "sliding_window_counter", []string{"1000000000/hour"}, []string{"1000000000/day"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.Store.Backend = tc.backend
			c.Plans = []config.PlanConfig{{Name: "gold"}}
			c.Limits[1].Algorithm, c.Limits[1].Rates = tc.algorithm, tc.rates
			if tc.planRates != nil {
				c.Limits[1].PlanRates = map[string][]string{"gold": tc.planRates}
			}
			err := validate(&c)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("override", func(t *testing.T) {
		c := base()
		c.Store.Backend = "redis"
		p, err := Compile(c, noEnv, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := p.Limit("search") // 100/minute, sliding_window_log
		if _, errs := l.OverrideLimit(OverrideNumbers{Rates: []string{"1000/minute"}}); len(errs) != 0 {
			t.Errorf("override at the bound: %v", errs)
		}
		_, errs := l.OverrideLimit(OverrideNumbers{Rates: []string{"100000/minute"}})
		if len(errs) != 1 || errs[0].Field != "rates" || !strings.Contains(errs[0].Message, bound) {
			t.Errorf("override over the bound: %v, want one rates error naming the bound", errs)
		}
		c.Store.Backend = "memory"
		if p, err = Compile(c, noEnv, nil); err != nil {
			t.Fatal(err)
		}
		if _, errs := p.Limit("search").OverrideLimit(OverrideNumbers{Rates: []string{"100000/minute"}}); len(errs) != 0 {
			t.Errorf("override on the memory store: %v", errs)
		}
	})
}
