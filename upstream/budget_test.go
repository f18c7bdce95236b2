package upstream

import (
	"testing"
	"time"
)

// A budget of 20 % plus 3 a 10 s window, on a fake clock: a quiet window
// allows 3, 100 requests allow 3 + 20, and the requests leave the window
// a tenth of it at a time.
func TestBudget(t *testing.T) {
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := NewBudget(RetryBudget{Percent: 20, Window: 10 * time.Second, MinRetries: 3}, c.now)
	retries := func() int {
		n := 0
		for b.TryRetry() {
			n++
			if n > 1000 {
				t.Fatal("the budget never ran out")
			}
		}
		return n
	}
	if got := retries(); got != 3 {
		t.Fatalf("quiet window: %d retries, want 3", got)
	}
	for range 100 {
		b.Request()
	}
	if got := retries(); got != 20 {
		t.Fatalf("after 100 requests: %d more retries, want 20 (23 in all)", got)
	}
	// 5 s later, 50 more requests: 150 in the window, 3 + 30 retries.
	c.t = c.t.Add(5 * time.Second)
	for range 50 {
		b.Request()
	}
	if got := retries(); got != 10 {
		t.Fatalf("after 150 requests: %d more retries, want 10 (33 in all)", got)
	}
	// 10 s after the first requests, their bucket left the window: 50
	// requests (3 + 10 retries) and the 10 retries of the 5 s bucket.
	c.t = c.t.Add(5 * time.Second)
	if got := retries(); got != 3 {
		t.Fatalf("first bucket gone: %d more retries, want 3 (13 in the window)", got)
	}
	// A whole window later, nothing is left.
	c.t = c.t.Add(10 * time.Second)
	if got := retries(); got != 3 {
		t.Fatalf("new window: %d retries, want 3", got)
	}
}

// No budget (0 % and no minimum) allows no retry.
func TestBudgetZero(t *testing.T) {
	b := NewBudget(RetryBudget{Window: time.Second}, nil)
	for range 100 {
		b.Request()
	}
	if b.TryRetry() {
		t.Fatal("a retry with no budget")
	}
}

// A bucket left over from an older window (not yet reused) counts for
// nothing: 13 s after a burst the window holds none of it.
func TestBudgetStaleBucket(t *testing.T) {
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := NewBudget(RetryBudget{Percent: 50, Window: 10 * time.Second, MinRetries: 1}, c.now)
	for range 100 {
		b.Request()
	}
	for b.TryRetry() {
	}
	c.t = c.t.Add(13 * time.Second)
	n := 0
	for b.TryRetry() {
		n++
	}
	if n != 1 {
		t.Fatalf("%d retries in a window without requests, want 1 (min_retries)", n)
	}
}
