package hybrid

import (
	"context"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// giveBack is units to give back: hit.Cost units of hit counted at at
// (on the store's clock).
type giveBack struct {
	hit ratelimit.Hit
	at  int64
}

// giveBack sends the units of the ended leases in plans back to the
// wrapped store, in one call, if it can take them. A failed call is not
// retried: it may have landed, and a second one would give back units
// other gateways have since admitted.
func (s *Store) giveBack(ctx context.Context, now time.Time, plans []plan) {
	hits, at := takeBacks(plans)
	s.returnUnits(ctx, now, hits, at)
}

// giveBackAlongside starts giving back the units of the ended leases in
// plans (as giveBack) while the caller makes its store call, and returns
// a wait for it. The request that ends a lease with units left thus pays
// about one round trip, not two (with coalescing both calls may share
// one): the two are independent on the store (the give-back only
// subtracts from the window or bucket of its instant), and Decide still
// returns only once both are done.
func (s *Store) giveBackAlongside(ctx context.Context, now time.Time, plans []plan) (wait func()) {
	hits, at := takeBacks(plans)
	if len(hits) == 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.returnUnits(ctx, now, hits, at)
	}()
	return func() { <-done }
}

// takeBacks removes the units to give back from plans and returns them
// as hits with the instants they were counted at.
func takeBacks(plans []plan) ([]ratelimit.Hit, []time.Time) {
	var hits []ratelimit.Hit
	var at []time.Time
	for i := range plans {
		for _, b := range plans[i].back {
			hits = append(hits, b.hit)
			at = append(at, time.UnixMicro(b.at))
		}
		plans[i].back = nil
	}
	return hits, at
}

func (s *Store) returnUnits(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) {
	if len(hits) == 0 {
		return
	}
	var n uint64
	for _, h := range hits {
		n += uint64(h.Cost)
	}
	r, ok := s.next.(ratelimit.Returner)
	if !ok {
		s.stats.dropped.Add(n)
		return
	}
	s.stats.returns.Add(1)
	// The request may be done (or canceled) by now; the give-back is the
	// gateway's, bounded by the store's own timeout.
	if err := r.Return(context.WithoutCancel(ctx), now, hits, at); err != nil {
		s.stats.dropped.Add(n)
		return
	}
	s.stats.returned.Add(n)
}

// Flush ends every lease this store holds at now and gives their unused
// units back to the wrapped store (one call). The gateway calls it when
// it shuts down and when a reload swaps the policy (leases of a limit
// reloaded away would otherwise stay counted until their windows end).
func (s *Store) Flush(ctx context.Context, now time.Time) {
	t := now.UnixMicro()
	var hits []ratelimit.Hit
	var at []time.Time
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, l := range sh.m {
			for _, b := range l.takeBack(k.key, t) {
				hits = append(hits, b.hit)
				at = append(at, time.UnixMicro(b.at))
			}
		}
		sh.mu.Unlock()
	}
	s.returnUnits(ctx, now, hits, at)
}
