package memstore

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestDistinctMemoryBounded: a client sending a million distinct values
// to one key (the highest limit, so the key is estimated) makes the store hold no more
// than KeyBytes for it, the bound validate prints: past the exact range
// the key holds fixed-size registers, whatever the values.
func TestDistinctMemoryBounded(t *testing.T) {
	s := New(Options{})
	l := &ratelimit.Limit{Name: "d", Algorithm: ratelimit.Distinct, Rates: []ratelimit.Rate{{Limit: ratelimit.DistinctMaxLimit, Window: time.Hour}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	empty := s.Bytes()
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	for i := range n {
		if i%100_000 == 0 {
			now = now.Add(20 * time.Minute) // every sub-window of the ring in use
		}
		if _, err := s.Decide(context.Background(), now, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1, Value: r.Uint64()}}, out); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	if got, bound := s.Bytes()-empty, KeyBytes(l); got > bound || got < ratelimit.DistinctRegisters {
		t.Fatalf("one key after %d distinct values holds %d bytes; bound %d", n, got, bound)
	}
	if s.Len() != 1 {
		t.Fatalf("%d keys, want 1", s.Len())
	}
}
