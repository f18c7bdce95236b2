package policy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

// withAdaptive is base() with an adaptive limit "upstream" on the search
// route, two plans and a priority header trusted from 10.0.0.0/8.
func withAdaptive() config.Config {
	c := base()
	a := config.DefaultLimit()
	a.Name, a.Algorithm, a.By, a.MinInFlight, a.MaxInFlight, a.Reserve = "upstream", AlgorithmAdaptive, []string{}, 2, 200, 0.2
	a.PriorityHeader, a.PriorityTrustedFrom, a.MaxDelay = "x-priority", []string{"10.0.0.0/8"}, "50ms"
	c.Limits = append(c.Limits, a)
	c.Routes[0].Limits = []string{"search", "upstream"}
	c.Plans = []config.PlanConfig{{Name: "free", Priority: "sheddable"}, {Name: "pro"}}
	return c
}

func TestAdaptiveProblems(t *testing.T) {
	testProblems(t, withAdaptive, []problemCase{
		{"valid", func(*config.Config) {}, nil},
		{"rates", func(c *config.Config) { c.Limits[2].Rates = []string{"10/s"} }, []string{`limits[2].rates: adaptive_concurrency takes no rates`}},
		{"by client", func(c *config.Config) { c.Limits[2].By = []string{"client"} }, []string{`limits[2].by: adaptive_concurrency keys by [] (one limit for the upstream) or ["route"]`}},
		{"by route", func(c *config.Config) { c.Limits[2].By = []string{"route"} }, nil},
		{"min above max", func(c *config.Config) { c.Limits[2].MinInFlight = 300 }, []string{`limits[2].min_in_flight: 300 exceeds max_in_flight 200`}},
		{"reserve", func(c *config.Config) { c.Limits[2].Reserve = 0.9 }, []string{`limits[2].reserve: must be in 0..0.5, got 0.9`}},
		{"bad header", func(c *config.Config) { c.Limits[2].PriorityHeader = "x priority" }, []string{`limits[2].priority_header: invalid header name "x priority"`}},
		{"trusted without header", func(c *config.Config) { c.Limits[2].PriorityHeader = "" }, []string{`limits[2].priority_trusted_from: applies only with priority_header`}},
		{"bad cidr", func(c *config.Config) { c.Limits[2].PriorityTrustedFrom = []string{"nope"} }, []string{`limits[2].priority_trusted_from[0]: invalid CIDR "nope"`}},
		{"cost header", func(c *config.Config) { c.Limits[2].CostHeader = "X-Cost" }, []string{`limits[2].cost_header: does not apply to adaptive_concurrency`}},
		{"plan priority", func(c *config.Config) { c.Plans[1].Priority = "urgent" }, []string{`plans[1].priority: unknown priority "urgent" (want critical, normal or sheddable)`}},
		{"route priority case", func(c *config.Config) { c.Routes[0].Priority = "Critical" }, []string{`routes[0].priority: unknown priority "Critical"`}},
		{"max delay", func(c *config.Config) { c.Limits[2].MaxDelay = "-1s" }, []string{`limits[2].max_delay: must be positive, got -1s`}},
	})
}

// TestAdaptiveCompiled: the adaptive limit is kept out of the route's
// store limits, and a request's class is the believed header's, else the
// plan's, else the route's, else normal.
func TestAdaptiveCompiled(t *testing.T) {
	c := withAdaptive()
	c.Routes[0].Priority = "critical"
	p, err := Compile(c, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := p.Routes[0]
	if len(rt.Limits) != 2 || len(rt.Adaptive) != 1 || rt.Adaptive[0].Name != "upstream" {
		t.Fatalf("route limits %d, adaptive %d; want the adaptive limit apart", len(rt.Limits), len(rt.Adaptive))
	}
	a := rt.Adaptive[0].Adaptive
	if a.Config.MinLimit != 2 || a.Config.MaxLimit != 200 || a.Config.Reserve != 0.2 || a.MaxDelay.Milliseconds() != 50 {
		t.Fatalf("compiled %+v", a)
	}
	free := &keys.Identity{Plan: "free", PlanIndex: 1}
	pro := &keys.Identity{Plan: "pro", PlanIndex: 2}
	hdr := func(v string) http.Header { return http.Header{"X-Priority": {v}} }
	for _, tt := range []struct {
		name string
		id   *keys.Identity
		h    http.Header
		peer string
		want adaptive.Priority
	}{
		{"trusted header", pro, hdr("sheddable"), "10.1.2.3:5000", adaptive.Sheddable},
		{"untrusted header ignored", free, hdr("critical"), "192.0.2.1:5000", adaptive.Sheddable},
		{"plan", free, nil, "10.1.2.3:5000", adaptive.Sheddable},
		{"plan without priority: route", pro, nil, "10.1.2.3:5000", adaptive.Critical},
		{"unknown value: route", &keys.Identity{}, hdr("urgent"), "10.1.2.3:5000", adaptive.Critical},
		{"header twice: ignored", &keys.Identity{}, http.Header{"X-Priority": {"sheddable", "critical"}}, "10.1.2.3:5000", adaptive.Critical},
		{"peer not an address", &keys.Identity{}, hdr("sheddable"), "@", adaptive.Critical},
	} {
		if got := a.Priority(rt, tt.id, tt.h, tt.peer); got != tt.want {
			t.Errorf("%s: Priority = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := a.Priority(p.Routes[1], &keys.Identity{}, nil, ""); got != adaptive.Normal {
		t.Errorf("no priority anywhere: %v, want normal", got)
	}
	c.Limits[2].PriorityTrustedFrom = nil
	if p, err = Compile(c, noEnv, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "limits[2]: priority_header X-Priority is believed from every client") {
		t.Errorf("a priority header believed from anyone: warnings %q", p.Warnings)
	}
}
