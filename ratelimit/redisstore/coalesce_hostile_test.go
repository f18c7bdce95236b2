package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestCoalesceHostile: what one call in a pipeline can do to the others
// batched with it, one row each (docs/hostile-inputs.md "Coalescing and
// the Function library"). One lane, so concurrent calls always share
// pipelines; every row checks that batches formed.
func TestCoalesceHostile(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	for _, tc := range []struct {
		name string
		// bad is the key of the hostile calls; setup prepares it.
		setup func(t *testing.T, s *redisstore.Store, l *ratelimit.Limit)
		cost  int64 // of the hostile calls
		// badErr: the hostile calls fail with a store error (else they
		// are decided, denied).
		badErr bool
	}{
		{"a key holding another type (WRONGTYPE) fails only its own calls", func(t *testing.T, s *redisstore.Store, l *ratelimit.Limit) {
			if err := c.HSet(ctx, s.Key(l, "{h}bad"), "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
		}, 1, true},
		{"a corrupt counter value fails only its own calls", func(t *testing.T, s *redisstore.Store, l *ratelimit.Limit) {
			if err := c.Set(ctx, s.Key(l, "{h}bad"), "not a state", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, 1, true},
		{"a cost above the capacity is denied alone", func(*testing.T, *redisstore.Store, *ratelimit.Limit) {}, 1 << 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, redisstore.Options{DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1})
			l := finished(t, ratelimit.Limit{Name: "ch", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(100, time.Hour)}})
			tc.setup(t, s, l)
			var goodAllowed, goodErrs, badErrs, badAllowed atomic.Int64
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out := make([]ratelimit.Decision, 1)
					for i := range 60 {
						hit := ratelimit.Hit{Limit: l, Key: "{h}good" + strconv.Itoa(w%4), Cost: 1}
						bad := i%3 == 0
						if bad {
							hit = ratelimit.Hit{Limit: l, Key: "{h}bad", Cost: tc.cost}
						}
						ok, err := s.Decide(ctx, time.Now(), []ratelimit.Hit{hit}, out)
						switch {
						case bad && err != nil:
							if !errors.Is(err, ratelimit.ErrStore) {
								t.Errorf("hostile call: %v, want a store error", err)
							}
							badErrs.Add(1)
						case bad && ok:
							badAllowed.Add(1)
						case err != nil:
							goodErrs.Add(1)
						case ok:
							goodAllowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			st := s.Stats()
			if st.Batches == 0 || st.Batched < 2*st.Batches {
				t.Fatalf("no batching: %d batches carrying %d calls", st.Batches, st.Batched)
			}
			if goodErrs.Load() != 0 || goodAllowed.Load() != 400 {
				t.Fatalf("calls batched with hostile ones: %d errors, %d allowed; want none and exactly 4 keys × 100", goodErrs.Load(), goodAllowed.Load())
			}
			const hostile = 32 * 20
			if tc.badErr && badErrs.Load() != hostile || !tc.badErr && (badErrs.Load() != 0 || badAllowed.Load() != 0) {
				t.Fatalf("hostile calls: %d errors, %d allowed of %d", badErrs.Load(), badAllowed.Load(), hostile)
			}
			if st.Breaker != redisstore.BreakerClosed || st.OtherErrors != 0 || st.Timeouts != 0 {
				t.Fatalf("a hostile key's errors count against Redis: %+v", st)
			}
		})
	}
}
