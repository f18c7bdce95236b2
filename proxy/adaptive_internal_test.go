package proxy

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

func adaptivePolicy(t *testing.T, max int64, by []string) *policy.Policy {
	t.Helper()
	c := config.Default()
	l := config.DefaultLimit()
	l.Name, l.Algorithm, l.By, l.MaxInFlight = "up", policy.AlgorithmAdaptive, by, max
	c.Limits = []config.LimitConfig{l}
	for _, name := range []string{"a", "b"} {
		r := config.DefaultRoute()
		r.Name, r.PathPrefix, r.Upstream, r.Limits = name, "/"+name, "http://127.0.0.1:9", []string{"up"}
		c.Routes = append(c.Routes, r)
	}
	p, err := policy.Compile(c, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdaptiveKeptAcrossSwaps: a reload that keeps an adaptive limit
// keeps its limiter (what it learned); one that changes its numbers
// starts afresh; by = [] shares one limiter between routes, by =
// ["route"] gives each its own.
func TestAdaptiveKeptAcrossSwaps(t *testing.T) {
	var set adaptiveLimiters
	now := time.Unix(1000, 0)
	p1 := adaptivePolicy(t, 100, nil)
	m1 := set.update(p1, now)
	if a, b := m1[p1.Routes[0]][0], m1[p1.Routes[1]][0]; a != b {
		t.Fatal("by = []: the two routes have limiters of their own, want one shared")
	}
	p2 := adaptivePolicy(t, 100, nil)
	m2 := set.update(p2, now)
	if m2[p2.Routes[0]][0] != m1[p1.Routes[0]][0] {
		t.Fatal("an unchanged limit lost its limiter on reload")
	}
	p3 := adaptivePolicy(t, 200, nil)
	m3 := set.update(p3, now)
	if m3[p3.Routes[0]][0] == m1[p1.Routes[0]][0] {
		t.Fatal("a limit whose ceiling changed kept its old limiter")
	}
	p4 := adaptivePolicy(t, 200, []string{"route"})
	m4 := set.update(p4, now)
	if m4[p4.Routes[0]][0] == m4[p4.Routes[1]][0] {
		t.Fatal(`by = ["route"]: the routes share a limiter, want one each`)
	}
	if len(set.m) != 2 {
		t.Fatalf("%d limiters kept, want the current policy's 2", len(set.m))
	}
}
