package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.Returner = (*Store)(nil)

// Return implements ratelimit.Returner: one script call (mode 3, the
// algorithm's cancel in lua/fixed_window.lua and lua/sliding_counter.lua)
// per hit of a batchable limit, giving its units back to the window or
// bucket of at[i]. With ClockStore at[i] is on Redis's clock: the
// Decision.At the count reported (the caller's clock says nothing about
// Redis's windows). A call whose reply is lost is not retried: it may have
// given the units back.
func (s *Store) Return(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	if len(at) < len(hits) {
		return fmt.Errorf("redisstore: %d instants for %d hits", len(at), len(hits))
	}
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
		if !h.Limit.Algorithm.Batchable() || h.Cost <= 0 {
			continue
		}
		hdr := s.header(nil, modeCancel, now, false, hits[i:i+1])
		keys := []string{s.Key(h.Limit, h.Key)}
		args := []any{hdr, s.limitArg(h.Limit), string(appendF64(nil, float64(at[i].UnixMicro())))}
		if err := s.call(ctx, func(ctx context.Context) error {
			return s.decide.Run(ctx, s.client, keys, args...).Err()
		}); err != nil {
			return err
		}
	}
	return nil
}
