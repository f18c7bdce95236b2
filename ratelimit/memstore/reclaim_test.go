package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestClockStepBackAfterExpiry is a regression test: a state reclaimed
// the moment it expired made a clock that then stepped back see a fresh
// (full) bucket where the old, almost full one still applied — a decision
// the Redis store (whose keys outlive their expiry) did not make.
func TestClockStepBackAfterExpiry(t *testing.T) {
	l := &ratelimit.Limit{Name: "tb", Algorithm: ratelimit.TokenBucket, Burst: 8,
		Rates: []ratelimit.Rate{{Limit: 3, Window: time.Second}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	s := memstore.New(memstore.Options{Shards: 1})
	ctx := context.Background()
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	if ok, err := s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "a", Cost: 1}}, out); !ok || err != nil {
		t.Fatalf("first hit: %v %v", ok, err)
	}
	// The bucket is full again 333 ms later. Half a second after that,
	// new keys arrive (which may reclaim expired states)...
	t1 := t0.Add(850 * time.Millisecond)
	for i := range 10 {
		if _, err := s.Decide(ctx, t1, []ratelimit.Hit{{Limit: l, Key: fmt.Sprint("new", i), Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
	}
	// ...then the clock steps back to 100 ms after the first hit, when the
	// bucket held 7.3 tokens: after this hit, 6 remain (not 7).
	if _, err := s.Decide(ctx, t0.Add(100*time.Millisecond), []ratelimit.Hit{{Limit: l, Key: "a", Cost: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Remaining != 6 {
		t.Errorf("after the clock stepped back: remaining %d, want 6 (the state was forgotten)", out[0].Remaining)
	}
}

// TestHeldConcurrencySlotNeverReclaimed: a concurrency state with slots in
// flight never expires (its expiry is the largest tick), so making room for
// new keys must never reclaim it — whatever arithmetic compares expiries.
func TestHeldConcurrencySlotNeverReclaimed(t *testing.T) {
	l := &ratelimit.Limit{Name: "conc", Algorithm: ratelimit.Concurrency, MaxInFlight: 1}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	s := memstore.New(memstore.Options{Shards: 1})
	ctx := context.Background()
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	if ok, _ := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "held", Cost: 1}}, out); !ok {
		t.Fatal("first acquire denied")
	}
	later := now.Add(time.Hour)
	for i := range 10 {
		s.Decide(ctx, later, []ratelimit.Hit{{Limit: l, Key: fmt.Sprint("other", i), Cost: 1}}, out)
	}
	if ok, _ := s.Decide(ctx, later, []ratelimit.Hit{{Limit: l, Key: "held", Cost: 1}}, out); ok {
		t.Error("a held slot was forgotten: a second request was admitted over max_in_flight = 1")
	}
}
