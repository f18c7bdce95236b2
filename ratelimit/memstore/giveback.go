package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.Returner = (*Store)(nil)

// Return implements ratelimit.Returner: it gives back the units of every
// hit of a batchable limit counted at at[i] to the window or bucket that
// holds them, as far as the state still holds it. A state gone since
// (reset, evicted, expired) gives back nothing.
func (s *Store) Return(_ context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	if len(at) < len(hits) {
		return fmt.Errorf("memstore: %d instants for %d hits", len(at), len(hits))
	}
	t := now.UnixMicro()
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("memstore: hit %d: %w", i, err)
		}
		if !h.Limit.Algorithm.Batchable() {
			continue
		}
		hv := s.hash(h.Limit.ID, h.Key)
		sh := &s.shards[s.shardOf(hv)]
		sh.mu.Lock()
		if j := sh.t.find(uint32(hv), h.Limit.ID, h.Key); j != none {
			st := sh.t.stateAt(j, kindOf(h.Limit))
			if t < sh.t.expiryOf(&st, h.Limit) {
				sh.t.apply(&st, opReturn, h.Limit, &args{now: at[i].UnixMicro(), cost: h.Cost})
			}
		}
		sh.mu.Unlock()
	}
	return nil
}
