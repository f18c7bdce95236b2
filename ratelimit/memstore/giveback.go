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
		s.applyHeld(h, t, opReturn, &args{now: at[i].UnixMicro(), cost: h.Cost})
	}
	return nil
}

// applyHeld applies o with a to the state of h while the store still
// holds it at t (µs); a state gone since (reset, evicted, expired) is left
// alone: what it counted is gone with it.
func (s *Store) applyHeld(h ratelimit.Hit, t int64, o op, a *args) {
	hv := s.hash(h.Limit.ID, h.Key)
	sh := &s.shards[s.shardOf(hv)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if j := sh.t.find(uint32(hv), h.Limit.ID, h.Key); j != none {
		st := sh.t.stateAt(j, kindOf(h.Limit))
		if t < sh.t.expiryOf(&st, h.Limit) {
			sh.t.apply(&st, o, h.Limit, a)
		}
	}
}
