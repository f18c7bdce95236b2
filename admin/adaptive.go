package admin

import (
	"encoding/json"
	"net/http"
)

// AdaptiveState is one adaptive_concurrency limiter as /admin/limits and
// the dashboard show it: what this gateway has learned of its upstream.
type AdaptiveState struct {
	// Limit is the limit's name; Route the route it learns for when the
	// limit is keyed by route (omitted otherwise).
	Limit string `json:"limit"`
	Route string `json:"route,omitempty"`
	// Mode is "enforce" or "shadow" (sheds nothing, counts what it would).
	Mode string `json:"mode"`
	// LearnedLimit is the concurrency the upstream is thought to take.
	LearnedLimit float64 `json:"learned_limit"`
	// InFlight and Waiting are the requests holding and waiting for a slot.
	InFlight int64 `json:"in_flight"`
	Waiting  int64 `json:"waiting"`
	// MinLatencyMS is the base latency (0 until measured) and
	// SampleLatencyMS the median of the last window, in milliseconds.
	MinLatencyMS    float64 `json:"min_latency_ms"`
	SampleLatencyMS float64 `json:"sample_latency_ms"`
	// Probing is set while the base latency is measured again.
	Probing bool `json:"probing"`
	// Shed counts the requests refused (or, in shadow mode, that would
	// have been), by priority: critical, normal, sheddable.
	Shed map[string]uint64 `json:"shed"`
}

// AdaptiveLimit is the body of GET /admin/limits?limit=NAME for an
// adaptive_concurrency limit: it has no counters per client, only this
// gateway's limiters (one, or one per route).
type AdaptiveLimit struct {
	Limit     string          `json:"limit"`
	Algorithm string          `json:"algorithm"`
	Limiters  []AdaptiveState `json:"limiters"`
}

// adaptiveLimit answers /admin/limits for an adaptive limit and reports
// true, or reports false when name is no adaptive limit.
func (h *handler) adaptiveLimit(w http.ResponseWriter, r *http.Request) bool {
	name := r.URL.Query().Get("limit")
	if h.o.Policy == nil || name == "" {
		return false
	}
	l := h.o.Policy().Limit(name)
	if l == nil || l.Adaptive == nil {
		return false
	}
	if r.Method != http.MethodGet {
		problem(w, http.StatusBadRequest, "limit "+name+" is adaptive_concurrency: it keeps no counters to reset")
		return true
	}
	out := AdaptiveLimit{Limit: name, Algorithm: "adaptive_concurrency", Limiters: []AdaptiveState{}}
	if h.o.Adaptive != nil {
		for _, s := range h.o.Adaptive() {
			if s.Limit == name {
				out.Limiters = append(out.Limiters, s)
			}
		}
	}
	body, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		problem(w, http.StatusInternalServerError, "encoding the response failed: "+err.Error())
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(body, '\n'))
	return true
}
