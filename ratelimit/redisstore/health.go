package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// Health runs a store's readiness check and logs when its outcome
// changes, so that a store that cannot decide is said once with its cause,
// not on every probe. Set Ready (usually Store.Ready) and Log before the
// first Check; Health is safe for concurrent use after that.
type Health struct {
	// Ready is the readiness check, such as Store.Ready.
	Ready func(context.Context) error
	// Log receives a warning when the store stops making decisions and
	// an info line when it makes them again.
	Log *slog.Logger

	mu   sync.Mutex
	last string // the last failure's kind (healthKind); "" while healthy
}

// healthKind is what Health compares between checks: a refusal's cause,
// or "unavailable" for every outage (unreachable, breaker open), so that
// an outage alternating between those two texts logs once.
func healthKind(err error) string {
	if errors.Is(err, ErrRefused) {
		return err.Error()
	}
	return "unavailable"
}

// Check runs the readiness check, logs a change of outcome, and returns
// the check's error.
func (h *Health) Check(ctx context.Context) error {
	err := h.Ready(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil && h.last != "":
		h.Log.Info("the Redis store makes decisions again")
		h.last = ""
	case err != nil && healthKind(err) != h.last:
		h.Log.Warn("the Redis store cannot make a decision", "cause", err.Error())
		h.last = healthKind(err)
	}
	return err
}
