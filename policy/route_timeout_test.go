package policy

import (
	"strings"
	"testing"
	"time"
)

func TestRouteIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"", 0, ""},
		{"0s", 0, ""},
		{"90s", 90 * time.Second, ""},
		{"-1s", 0, "routes[0].idle_timeout: must not be negative"},
		{"soon", 0, `routes[0].idle_timeout: invalid duration "soon"`},
	} {
		c := base()
		c.Routes[0].IdleTimeout = tc.in
		p, err := Compile(c, noEnv, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("idle_timeout %q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("idle_timeout %q: %v", tc.in, err)
		}
		if got := p.Routes[0].IdleTimeout; got != tc.want {
			t.Errorf("idle_timeout %q compiled to %v, want %v", tc.in, got, tc.want)
		}
	}
}
