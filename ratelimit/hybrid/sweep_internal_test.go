package hybrid

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestFullTableSweepsOnce: a flood of new keys at a full lease table (a
// client sending a random key per request) walks each shard once, not
// once per request (each walk of a full default table cost ~0.4 ms of CPU
// under the shard's lock: ~100 times the decision), is decided exactly
// meanwhile, and keys are leased again once the leases held have ended.
func TestFullTableSweepsOnce(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(memstore.New(memstore.Options{}), Options{MaxKeys: 512})
	l := &ratelimit.Limit{Name: "l", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 100, Window: time.Hour}},
		Batch: &ratelimit.Batch{Interval: time.Minute, Lease: 5}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	out := make([]ratelimit.Decision, 1)
	sweeps := func() (n uint64) {
		for i := range s.shards {
			s.shards[i].mu.Lock()
			n += s.shards[i].sweeps
			s.shards[i].mu.Unlock()
		}
		return n
	}
	for i := range 5000 {
		if ok, _ := s.Decide(ctx, t0.Add(time.Duration(i)*time.Microsecond), []ratelimit.Hit{{Limit: l, Key: "k" + strconv.Itoa(i), Cost: 1}}, out); !ok {
			t.Fatalf("key %d denied", i)
		}
	}
	if n := sweeps(); n > 2*nShards {
		t.Fatalf("%d walks of the lease table for 5,000 new keys at a full table, want at most %d", n, 2*nShards)
	}
	if st := s.Stats(); st.Exact < 5000-512 {
		t.Fatalf("%d of 5000 decided exactly with room for 512 leases", st.Exact)
	}
	exact := s.Stats().Exact
	later := t0.Add(2 * time.Minute)
	for i := range 8 {
		s.Decide(ctx, later, []ratelimit.Hit{{Limit: l, Key: "late" + strconv.Itoa(i), Cost: 1}}, out)
	}
	if d := s.Stats().Exact - exact; d != 0 {
		t.Fatalf("after every lease ended, %d of 8 new keys were still decided exactly (the ended leases were not dropped)", d)
	}
}
