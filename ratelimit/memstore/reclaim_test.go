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

// TestHeldConcurrencySlotNeverEvicted: a full shard evicts its least
// recently used state, but never a held concurrency slot (forgetting it
// would admit requests past max_in_flight); when every state is a held
// slot the shard grows past its bound instead, and evicts again once a
// state that can go is there.
func TestHeldConcurrencySlotNeverEvicted(t *testing.T) {
	conc := &ratelimit.Limit{Name: "conc", Algorithm: ratelimit.Concurrency, MaxInFlight: 1}
	fw := &ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 5, Window: time.Hour}}}
	for _, l := range []*ratelimit.Limit{conc, fw} {
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	s := memstore.New(memstore.Options{Shards: 1, MaxKeys: 4})
	ctx := context.Background()
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	decide := func(l *ratelimit.Limit, key string) bool {
		ok, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}}, out)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !decide(conc, "held") {
		t.Fatal("first acquire denied")
	}
	held := out[0]
	// The held slot is now the least recently used state; 20 new rate
	// keys pass through the 4-state shard.
	for i := range 20 {
		if !decide(fw, fmt.Sprint("k", i)) {
			t.Fatalf("new key %d denied", i)
		}
	}
	if decide(conc, "held") {
		t.Fatal("a held slot was evicted: a second request was admitted over max_in_flight = 1")
	}
	if got := s.Len(); got != 4 {
		t.Errorf("Len %d after the churn, want the bound 4", got)
	}
	// Fill the shard with held slots only: it grows by one past them.
	for i := range 5 {
		if !decide(conc, fmt.Sprint("h", i)) {
			t.Fatalf("held slot %d denied", i)
		}
	}
	if got := s.Len(); got != 6 {
		t.Errorf("Len %d with 6 held slots, want 6 (held slots are never evicted)", got)
	}
	if !decide(fw, "after") {
		t.Fatal("a new rate key was denied")
	}
	if !decide(fw, "after2") {
		t.Fatal("a new rate key was denied")
	}
	if got := s.Len(); got != 7 {
		t.Errorf("Len %d, want 6 held slots + 1 rate key (the older rate key evicted)", got)
	}
	// Released, the slot is free again.
	if err := s.Release(ctx, []ratelimit.Hit{{Limit: conc, Key: "held", Cost: 1}}, []ratelimit.Decision{held}); err != nil {
		t.Fatal(err)
	}
	if !decide(conc, "held") {
		t.Error("the slot released is still held")
	}
}

// TestHeldConcurrencySlotNeverEvictedForBytes: the byte bound evicts the
// least recently used keys too, but never a held concurrency slot.
func TestHeldConcurrencySlotNeverEvictedForBytes(t *testing.T) {
	conc := &ratelimit.Limit{Name: "conc", Algorithm: ratelimit.Concurrency, MaxInFlight: 1}
	logl := &ratelimit.Limit{Name: "log", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{{Limit: 1000, Window: time.Hour}}}
	for _, l := range []*ratelimit.Limit{conc, logl} {
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	s := memstore.New(memstore.Options{Shards: 1, MaxKeys: 1000, MaxBytes: 4096})
	ctx := context.Background()
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	if ok, _ := s.Decide(ctx, now, []ratelimit.Hit{{Limit: conc, Key: "held", Cost: 1}}, out); !ok {
		t.Fatal("first acquire denied")
	}
	for i := range 200 {
		now = now.Add(time.Millisecond)
		s.Decide(ctx, now, []ratelimit.Hit{{Limit: logl, Key: fmt.Sprint("k", i%50), Cost: 1}}, out)
	}
	if s.Evictions() == 0 {
		t.Fatal("the byte bound evicted nothing: the test does not exercise it")
	}
	if ok, _ := s.Decide(ctx, now, []ratelimit.Hit{{Limit: conc, Key: "held", Cost: 1}}, out); ok {
		t.Error("a held slot was evicted for bytes: a second request was admitted over max_in_flight = 1")
	}
}
