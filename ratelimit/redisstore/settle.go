package redisstore

import (
	"context"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// modeSettle is the script mode that gives back reserved units a request
// did not use (lua/settle.lua).
const modeSettle = 4

var _ ratelimit.Settler = (*Store)(nil)

// GiveBack implements ratelimit.Settler: mode 4 of the decide script
// gives each hit's units back to every window of its key as
// window.Giver does in Go, in one call for up to slotBatch hits (on a
// Cluster, per hash slot). With ratelimit.ClockStore at[i] is on Redis's
// clock (the count's Decision.At) and the settle instant is Redis TIME.
// A call whose reply is lost is not retried: it may have given the
// units back.
func (s *Store) GiveBack(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	return s.giveUnits(ctx, now, hits, at, modeSettle, ratelimit.Algorithm.Settleable)
}
