package hybrid

import (
	"context"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.Settler = (*Store)(nil)

// GiveBack implements ratelimit.Settler by the wrapped store's, when it
// has one (else nothing is given back: the units stay counted). A batched
// hit admitted from a lease reported the instant the store counted the
// lease in its Decision.At, so its unused units go back to the window or
// bucket that holds them in the store, as a lease's unused units do.
func (s *Store) GiveBack(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	if g, ok := s.next.(ratelimit.Settler); ok {
		return g.GiveBack(ctx, now, hits, at)
	}
	return nil
}
