package main

import (
	"time"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/admin"
)

// adaptiveView is the handler's adaptive limiters as the admin API shows
// them.
func (g *gateway) adaptiveView() []admin.AdaptiveState {
	stats := g.handler.AdaptiveStats()
	out := make([]admin.AdaptiveState, 0, len(stats))
	for _, s := range stats {
		mode := "enforce"
		if s.Shadow {
			mode = "shadow"
		}
		shed := make(map[string]uint64, adaptive.Priorities)
		for p := range adaptive.Priorities {
			shed[p.String()] = s.Shed[p]
		}
		out = append(out, admin.AdaptiveState{Limit: s.Name, Route: s.Route, Mode: mode,
			LearnedLimit: s.Limit, InFlight: s.InFlight, Waiting: s.Waiting,
			MinLatencyMS: ms(s.MinLatency), SampleLatencyMS: ms(s.SampleLatency), Probing: s.Probing, Shed: shed})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
