package telemetry

import (
	"context"
	"errors"
	"strings"
)

// Store error kinds (error.type).
const (
	storeErrOther = iota
	storeErrTimeout
	storeErrCanceled
	storeErrAuth
	storeErrReadOnly
	storeErrOOM
	storeErrBreaker
	storeErrKinds
)

var storeErrNames = [storeErrKinds]string{"store", "timeout", "canceled", "auth", "readonly", "oom", "circuit_open"}

// storeErrKind classifies a store error for the error.type label, so that
// an operator can tell an outage from rotated credentials, a failover
// to a replica or a full Redis. Redis reports those only in the error
// text.
func storeErrKind(err error) int {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return storeErrTimeout
	case errors.Is(err, context.Canceled):
		return storeErrCanceled
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "NOPERM"):
		return storeErrAuth
	case strings.Contains(msg, "READONLY"):
		return storeErrReadOnly
	case strings.Contains(msg, "OOM "):
		return storeErrOOM
	case strings.Contains(msg, "circuit breaker open"), strings.Contains(msg, "breaker open"):
		return storeErrBreaker
	}
	return storeErrOther
}
