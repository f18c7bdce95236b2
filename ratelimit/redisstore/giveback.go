package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.Returner = (*Store)(nil)

// Return implements ratelimit.Returner: mode 3 of the decide script (the
// algorithm's cancel in lua/fixed_window.lua and lua/sliding_counter.lua)
// gives the units of each hit of a batchable limit back to the window or
// bucket of at[i], in one call for up to slotBatch hits (on a Cluster,
// per hash slot), so that a gateway's shutdown gives back its leases of
// many keys in a few round trips. With ratelimit.ClockStore at[i] is on Redis's
// clock: the Decision.At the count reported (the caller's clock says
// nothing about Redis's windows). A call whose reply is lost is not
// retried: it may have given the units back. A failed slot's error is
// returned after the other slots have been given back.
func (s *Store) Return(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	return s.giveUnits(ctx, now, hits, at, modeCancel, ratelimit.Algorithm.Batchable)
}

// giveUnits runs script mode (modeCancel: Return's, modeSettle:
// GiveBack's) for the hits whose algorithm takes it, batched per slot.
func (s *Store) giveUnits(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time, mode int, takes func(ratelimit.Algorithm) bool) error {
	if len(at) < len(hits) {
		return fmt.Errorf("redisstore: %d instants for %d hits", len(at), len(hits))
	}
	var back []int // the hits with units to give back
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
		if takes(h.Limit.Algorithm) && h.Cost > 0 {
			back = append(back, i)
		}
	}
	if len(back) == 0 {
		return nil
	}
	keys := make([]string, len(back))
	for j, i := range back {
		keys[j] = s.Key(hits[i].Limit, hits[i].Key)
	}
	groups := [][]int{nil}
	if s.cluster {
		groups = groupBySlot(keys)
	} else {
		for j := range back {
			groups[0] = append(groups[0], j)
		}
	}
	// A failed slot does not stop the others: on a Cluster they may live
	// on masters that are up, and a give-back left undone strands units
	// until their window ends. Within a slot the first failure ends it
	// (the same master would fail the rest).
	var errs []error
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), slotBatch)
			if err := s.returnBatch(ctx, now, mode, hits, at, back, keys, g[:n]); err != nil {
				errs = append(errs, err)
				break
			}
			g = g[n:]
		}
	}
	return errors.Join(errs...)
}

// returnBatch gives back hits[back[j]] for j in g in one call.
func (s *Store) returnBatch(ctx context.Context, now time.Time, mode int, hits []ratelimit.Hit, at []time.Time, back []int, keys []string, g []int) error {
	sub := make([]ratelimit.Hit, len(g))
	ks := make([]string, len(g))
	var marks []byte
	for k, j := range g {
		sub[k], ks[k] = hits[back[j]], keys[j]
		marks = appendF64(marks, float64(at[back[j]].UnixMicro()))
	}
	args := make([]any, 0, 2+len(g))
	args = append(args, &bytesArg{s.header(nil, mode, now, false, sub)})
	for _, h := range sub {
		args = append(args, s.limitArg(h.Limit))
	}
	args = append(args, string(marks))
	return s.call(ctx, func(ctx context.Context) error {
		_, err := s.run(ctx, s.client, ks, args, nil)
		return err
	})
}
