package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// ClockSkew returns how far Redis's clock (TIME) is ahead of now, the
// clock the caller decides with: Redis's reading minus now at the middle of
// the round trip, so the network delay cancels out to within half the
// round trip. With ratelimit.ClockLocal every gateway must agree with the others;
// comparing each with Redis shows the one that does not.
func (s *Store) ClockSkew(ctx context.Context, now func() time.Time) (time.Duration, error) {
	before := now()
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis store: %w: TIME: %w", ratelimit.ErrStore, err)
	}
	after := now()
	mid := before.Add(after.Sub(before) / 2)
	return t.Sub(mid), nil
}
