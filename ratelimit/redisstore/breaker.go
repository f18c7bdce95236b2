package redisstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is the state of the store's circuit breaker.
type BreakerState uint8

const (
	// BreakerClosed lets every call through.
	BreakerClosed BreakerState = iota
	// BreakerOpen fails every call fast with ErrBreakerOpen until the
	// cooldown has passed.
	BreakerOpen
	// BreakerHalfOpen lets one probe call through; its outcome closes or
	// reopens the breaker.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (b BreakerState) String() string {
	switch b {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// breaker opens after a run of consecutive failures, so that while Redis is
// down calls fail at once instead of each paying the timeout; after a
// cooldown it lets one probe through, and the probe's success closes it.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	st       BreakerState
	failures int
	openedAt time.Time
	probing  bool
	// healthy is st == BreakerClosed && failures == 0, written under mu
	// and read without it: in that state, the state of nearly every call,
	// allow and success change nothing, so they skip the lock (shared by
	// every concurrent decision) and allow needs no clock.
	healthy atomic.Bool
}

func (b *breaker) init(threshold int, cooldown time.Duration) {
	b.threshold, b.cooldown = threshold, cooldown
	b.healthy.Store(true)
}

// allow reports whether a call may proceed at the instant now returns,
// read only when the breaker is not healthy.
func (b *breaker) allow(now func() time.Time) bool {
	if b.healthy.Load() {
		return true
	}
	return b.allowAt(now())
}

// allowAt reports whether a call may proceed at now.
func (b *breaker) allowAt(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.st {
	case BreakerClosed:
		return true
	case BreakerOpen:
		if now.Sub(b.openedAt) < b.cooldown {
			return false
		}
		b.st, b.probing = BreakerHalfOpen, true
		return true
	default: // half-open: one probe at a time
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
}

// success records a call that reached a healthy Redis. A success racing
// with a failure may skip resetting the failure's count: the same as had
// it come first.
func (b *breaker) success() {
	if b.healthy.Load() {
		return
	}
	b.mu.Lock()
	b.st, b.failures, b.probing = BreakerClosed, 0, false
	b.healthy.Store(true)
	b.mu.Unlock()
}

// abandon records a call that ended without saying anything about Redis
// (its caller cancelled it): a half-open breaker lets the next call probe.
func (b *breaker) abandon() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// failure records a failed call at now.
func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.healthy.Store(false)
	if b.st == BreakerHalfOpen || b.failures >= b.threshold {
		b.st, b.openedAt, b.probing = BreakerOpen, now, false
	}
}

// state returns the state at now (an open breaker past its cooldown reads
// as half-open).
func (b *breaker) state(now time.Time) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st == BreakerOpen && now.Sub(b.openedAt) >= b.cooldown {
		return BreakerHalfOpen
	}
	return b.st
}
