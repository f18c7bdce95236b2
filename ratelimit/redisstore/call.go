package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// call runs f under the store's timeout and the circuit breaker, and wraps
// its error in ratelimit.ErrStore. Only the store's own failures count
// toward the breaker: its timeout (or a caller's deadline, which the
// gateway sets to the same budget), connection errors and server errors.
// A caller that cancels (a client that went away) says nothing about
// Redis, so it neither opens nor closes the breaker.
func (s *Store) call(ctx context.Context, f func(ctx context.Context) error) error {
	caller := ctx
	s.stats.calls.Add(1)
	if !s.breaker.allow(s.now) {
		s.stats.breakerRejects.Add(1)
		return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, ErrBreakerOpen)
	}
	// Bound the call by the store's budget, unless the caller's deadline
	// is already at least as tight (the gateway's own request deadline,
	// when it sets one). The budget has no timer per call (budget.go).
	// Context deadlines run on the process's real clock, not s.now.
	err := f(s.budget(ctx))
	switch {
	case err == nil:
		s.breaker.success()
		return nil
	case isStateError(err):
		// Redis is healthy; this key holds something we cannot read.
		s.breaker.success()
		s.stats.stateErrors.Add(1)
	case errors.Is(caller.Err(), context.Canceled):
		s.breaker.abandon()
		s.stats.canceled.Add(1)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		s.breaker.failure(s.now())
		s.stats.timeouts.Add(1)
	case isTimeout(err):
		// The socket deadline (set from the context's) expired first:
		// the store's timeout all the same, and reported as one.
		s.breaker.failure(s.now())
		s.stats.timeouts.Add(1)
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	default:
		s.breaker.failure(s.now())
		s.stats.otherErrors.Add(1)
	}
	return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, err)
}

// CallTimeout returns the budget that bounds each of the Store's calls
// (Options.Timeout) without a timer of the caller's: a caller whose own
// deadline would be no tighter need not set one.
func (s *Store) CallTimeout() time.Duration { return s.opts.Timeout }

// isTimeout reports whether err is a network timeout (an i/o deadline).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isStateError reports whether err is a script error about one key's
// content (wrong type or corrupt state) rather than an unhealthy server.
func isStateError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "tollgate: corrupt")
}

// ErrBreakerOpen is wrapped (with ratelimit.ErrStore) by every call failed
// fast while the circuit breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open")
