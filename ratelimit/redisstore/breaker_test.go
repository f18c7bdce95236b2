package redisstore

import (
	"testing"
	"time"
)

// TestBreakerStates walks the breaker through its states by hand. The
// fast path (no lock, no clock while closed without failures) must decide
// exactly as the locked path: the clock is read only once a failure was
// seen, and a failure below the threshold leaves calls allowed.
func TestBreakerStates(t *testing.T) {
	var b breaker
	b.init(2, time.Second)
	t0 := time.Unix(1000, 0)
	reads := 0
	at := func(d time.Duration) func() time.Time {
		return func() time.Time { reads++; return t0.Add(d) }
	}
	if !b.allow(at(0)) || reads != 0 {
		t.Fatalf("closed breaker: allow read the clock %d times, want an answer without it", reads)
	}
	b.success()
	b.failure(t0)
	if !b.allow(at(0)) || reads != 1 {
		t.Fatalf("one failure of two: allowed must be true after one clock read (%d)", reads)
	}
	b.failure(t0)
	if b.allow(at(500 * time.Millisecond)) {
		t.Fatal("open breaker allowed a call within its cooldown")
	}
	if st := b.state(t0.Add(2 * time.Second)); st != BreakerHalfOpen {
		t.Fatalf("state past the cooldown = %s, want half-open", st)
	}
	if !b.allow(at(2 * time.Second)) {
		t.Fatal("half-open breaker refused its probe")
	}
	if b.allow(at(2 * time.Second)) {
		t.Fatal("half-open breaker let a second probe through")
	}
	b.success()
	if st := b.state(t0.Add(2 * time.Second)); st != BreakerClosed {
		t.Fatalf("state after the probe's success = %s, want closed", st)
	}
	reads = 0
	if !b.allow(at(2*time.Second)) || reads != 0 {
		t.Fatalf("closed again: allow read the clock %d times, want none", reads)
	}
	// A probe that fails reopens at once.
	b.failure(t0.Add(3 * time.Second))
	b.failure(t0.Add(3 * time.Second))
	if !b.allow(at(5 * time.Second)) {
		t.Fatal("no probe after the second cooldown")
	}
	b.failure(t0.Add(5 * time.Second))
	if st := b.state(t0.Add(5 * time.Second)); st != BreakerOpen {
		t.Fatalf("state after a failed probe = %s, want open", st)
	}
}
