package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.Canceler = (*Store)(nil)

// take counts cost units of st at t, or, for a delayed hit (d.Delay > 0),
// at its slot t + Delay, and records the reservation's mark in d.
func take(t *table, st *state, l *ratelimit.Limit, now, cost int64, value uint64, d *ratelimit.Decision) {
	if d.Delay <= 0 {
		t.apply(st, opTake, l, &args{now: now, cost: cost, value: value})
		return
	}
	t.apply(st, opTake, l, &args{now: now + int64(d.Delay/ratelimit.Tick), cost: cost})
	t.apply(st, opMark, l, &args{d: d})
}

// Cancel implements ratelimit.Canceler: it gives back the reservation of
// every counted hit with Delay > 0 on the state that holds it, as far as
// it is still ahead at now. A state gone since (reset, evicted) gives
// back nothing.
func (s *Store) Cancel(_ context.Context, now time.Time, hits []ratelimit.Hit, ds []ratelimit.Decision) error {
	if len(ds) < len(hits) {
		return fmt.Errorf("memstore: %d decisions for %d hits", len(ds), len(hits))
	}
	t := now.UnixMicro()
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("memstore: hit %d: %w", i, err)
		}
		if !ds[i].Counted || ds[i].Delay <= 0 {
			continue
		}
		s.applyHeld(h, t, opCancel, &args{now: t, cost: h.Cost, mark: ds[i].Mark})
	}
	return nil
}
