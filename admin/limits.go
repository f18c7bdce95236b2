package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/ratelimit"
)

// target resolves the limit and key of a /admin/limits request, answering
// the error itself when it fails.
func (h *handler) target(w http.ResponseWriter, r *http.Request) (*ratelimit.Limit, string, bool) {
	if h.o.Store == nil || h.o.Policy == nil {
		problem(w, http.StatusNotImplemented, "limits are not available")
		return nil, "", false
	}
	q := r.URL.Query()
	name, key := q.Get("limit"), q.Get("key")
	if name == "" {
		problem(w, http.StatusBadRequest, "query parameter \"limit\" is required")
		return nil, "", false
	}
	if !q.Has("key") {
		problem(w, http.StatusBadRequest, "query parameter \"key\" is required (the client: API key, user or IP; empty for a limit keyed by nothing)")
		return nil, "", false
	}
	l, ck, err := counterKey(h.o.Policy(), name, key, q)
	switch {
	case errors.Is(err, ErrNotFound):
		problem(w, http.StatusNotFound, err.Error())
		return nil, "", false
	case err != nil:
		problem(w, http.StatusBadRequest, err.Error())
		return nil, "", false
	}
	return l, ck, true
}

// Usage is the body of GET /admin/limits.
type Usage struct {
	// Limit is the limit's name.
	Limit string `json:"limit"`
	// Algorithm is its algorithm.
	Algorithm string `json:"algorithm"`
	// Mode is "enforce" or "shadow".
	Mode string `json:"mode"`
	// CounterKey is the store key of the client's counters (a hash).
	CounterKey string `json:"counter_key"`
	// Windows is the state of each window, in configuration order (one
	// entry for a concurrency limit).
	Windows []headers.Window `json:"windows"`
	// Override is the override in force for this client, whose numbers
	// Windows report; omitted when none.
	Override *OverrideView `json:"override,omitempty"`
	// PenaltySeconds is how long the client stays in the limit's penalty
	// box (every request denied by the limit); 0 when it is not in it or
	// the limit has no penalty. DELETE empties the box with the counters.
	PenaltySeconds float64 `json:"penalty_seconds,omitempty"`
}

// limits answers GET (usage) and DELETE (reset) of /admin/limits.
func (h *handler) limits(w http.ResponseWriter, r *http.Request) {
	if h.adaptiveLimit(w, r) { // adaptive.go: no counters, no key
		return
	}
	l, key, ok := h.target(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	// Under an override the client's requests are decided by the
	// override's limit: its numbers, and its counters when its windows
	// differ.
	ov := h.activeOverride(r.URL.Query())
	if ov != nil {
		l = ov.Limit
	}
	if r.Method == http.MethodDelete {
		h.reset(ctx, w, l, key)
	} else {
		h.usage(ctx, w, l, key, ov)
	}
}

func (h *handler) usage(ctx context.Context, w http.ResponseWriter, l *ratelimit.Limit, key string, ov *override.Compiled) {
	now := h.o.Now()
	ws, err := h.o.Store.Usage(ctx, now, l, key)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	var penalty float64
	if box := l.PenaltyBox(); box != nil {
		bu, err := h.o.Store.Usage(ctx, now, box, key)
		if err != nil {
			problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
			return
		}
		if len(bu) == 1 && bu[0].Used > 0 {
			penalty = bu[0].Reset.Seconds()
		}
	}
	u := Usage{Limit: l.Name, Algorithm: l.Algorithm.String(), Mode: "enforce", CounterKey: key, Windows: headers.Windows(l, ws, now),
		PenaltySeconds: penalty}
	if l.Shadow {
		u.Mode = "shadow"
	}
	if ov != nil {
		v := viewOf(ov.Record, "", h.o.Now())
		u.Override = &v
	}
	writeJSON(w, http.StatusOK, u)
}

func (h *handler) reset(ctx context.Context, w http.ResponseWriter, l *ratelimit.Limit, key string) {
	if err := h.o.Store.Reset(ctx, l, key); err != nil {
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	h.o.Logger.Info("admin: counters reset", "limit", l.Name, "counter_key", key)
	writeJSON(w, http.StatusOK, map[string]any{"reset": true, "limit": l.Name, "counter_key": key})
}
