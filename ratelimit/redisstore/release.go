package redisstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/tollgate/gateway/ratelimit"
)

// Release implements ratelimit.Store.
func (s *Store) Release(ctx context.Context, hits []ratelimit.Hit) error {
	var keys []string
	var args []any
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
		if h.Limit.Algorithm != ratelimit.Concurrency {
			continue
		}
		keys = append(keys, s.Key(h.Limit, h.Key))
		args = append(args, h.Cost)
	}
	if len(keys) == 0 {
		return nil
	}
	return s.call(ctx, func(ctx context.Context) error {
		if !s.cluster {
			return s.release.Run(ctx, s.client, keys, args...).Err()
		}
		// One script per slot.
		for _, g := range groupBySlot(keys) {
			ks, as := make([]string, len(g)), make([]any, len(g))
			for j, i := range g {
				ks[j], as[j] = keys[i], args[i]
			}
			if err := s.release.Run(ctx, s.client, ks, as...).Err(); err != nil {
				return err
			}
		}
		return nil
	})
}
