package main

import (
	"time"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/admin"
	"github.com/tollgate/gateway/telemetry"
	"go.opentelemetry.io/otel/metric"
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

// registerAdaptive exports the adaptive limiters as metrics, read at each
// scrape.
func (g *gateway) registerAdaptive(meter metric.Meter) (metric.Registration, error) {
	return telemetry.RegisterAdaptiveStats(meter, func() []telemetry.AdaptiveLimiter {
		var out []telemetry.AdaptiveLimiter
		for _, v := range g.adaptiveView() {
			out = append(out, telemetry.AdaptiveLimiter{Limit: v.Limit, Route: v.Route, Learned: v.LearnedLimit,
				InFlight: v.InFlight, MinLatency: v.MinLatencyMS / 1000, SampleLatency: v.SampleLatencyMS / 1000, Shed: v.Shed})
		}
		return out
	})
}
