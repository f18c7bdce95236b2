package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.Settler = (*Store)(nil)

// GiveBack implements ratelimit.Settler: the unused units of each
// reservation go back to the state that counted them, as far as it
// still holds them. A state gone since (reset, evicted, expired) gives
// back nothing.
func (s *Store) GiveBack(_ context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	if len(at) < len(hits) {
		return fmt.Errorf("memstore: %d instants for %d hits", len(at), len(hits))
	}
	t := now.UnixMicro()
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("memstore: hit %d: %w", i, err)
		}
		if !h.Limit.Algorithm.Settleable() {
			continue
		}
		s.applyHeld(h, t, opSettle, &args{now: t, at: at[i].UnixMicro(), cost: h.Cost})
	}
	return nil
}
