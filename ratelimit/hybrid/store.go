// Package hybrid is a ratelimit.Store that decides the hits of batched
// limits (ratelimit.Limit.Batch) from leases: each gateway takes a slice of
// a key's budget from the shared store ahead of use and admits from it
// locally, so that a hot key costs the store about one call per lease
// instead of one per request. Other hits go to the wrapped store in the
// same call, so a request stays all-or-nothing. What a fleet may admit
// past the limit, and what happens to unused units, is in ARCHITECTURE.md
// "Hybrid counting".
//
// The package knows nothing of HTTP and reads no clock: leases age on the
// instants passed to Decide.
package hybrid

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// MaxKeys bounds the leases (and cached denials) held, one per batched
	// limit and key; a batched hit on a new key past it is decided by the
	// wrapped store like an exact one. Default 100000.
	MaxKeys int
}

const nShards = 16

// Store wraps a ratelimit.Store with leases for batched limits. It is safe
// for concurrent use.
type Store struct {
	next   ratelimit.Store
	perMax int // entries per shard
	seed   maphash.Seed
	shards [nShards]shard
	stats  struct{ calls, leases, local, localDenied, exact, returns, returned, dropped atomic.Uint64 }
}

var _ ratelimit.Store = (*Store)(nil)

// New wraps next.
func New(next ratelimit.Store, o Options) *Store {
	if o.MaxKeys <= 0 {
		o.MaxKeys = 100000
	}
	s := &Store{next: next, perMax: max(1, o.MaxKeys/nShards), seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[leaseKey]*lease)
	}
	return s
}

// Stats are a Store's cumulative counters.
type Stats struct {
	// StoreCalls counts the wrapped store's Decide calls made for requests
	// with a batched hit; Leases the leases they carried.
	StoreCalls, Leases uint64
	// LocalAdmits and LocalDenials count batched hits decided without a
	// store call.
	LocalAdmits, LocalDenials uint64
	// Exact counts batched hits decided exactly because the lease table
	// was full.
	Exact uint64
	// Returns counts the give-back calls to the wrapped store, Returned
	// the units they carried, and Dropped the units of the calls that
	// failed (they may or may not have landed and are not retried).
	Returns, Returned, Dropped uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{StoreCalls: s.stats.calls.Load(), Leases: s.stats.leases.Load(), LocalAdmits: s.stats.local.Load(),
		LocalDenials: s.stats.localDenied.Load(), Exact: s.stats.exact.Load(),
		Returns: s.stats.returns.Load(), Returned: s.stats.returned.Load(), Dropped: s.stats.dropped.Load()}
}

// Release implements ratelimit.Store: batched limits hold nothing to
// release (concurrency is never batched).
func (s *Store) Release(ctx context.Context, hits []ratelimit.Hit, ds []ratelimit.Decision) error {
	return s.next.Release(ctx, hits, ds)
}

// Usage implements ratelimit.Store: the store's view, which counts every
// gateway's leases whole.
func (s *Store) Usage(ctx context.Context, now time.Time, limit *ratelimit.Limit, key string) ([]ratelimit.WindowUsage, error) {
	return s.next.Usage(ctx, now, limit, key)
}

// Reset implements ratelimit.Store: it also drops this gateway's lease and
// cached denial for the key (other gateways' end within their interval).
func (s *Store) Reset(ctx context.Context, limit *ratelimit.Limit, key string) error {
	if limit != nil {
		k := leaseKey{limit.ID, key}
		sh := s.shard(k)
		sh.mu.Lock()
		delete(sh.m, k)
		sh.mu.Unlock()
	}
	return s.next.Reset(ctx, limit, key)
}

// Close implements ratelimit.Store: it closes the wrapped store.
func (s *Store) Close() error { return s.next.Close() }

// PurgeDenials forgets the wrapped store's cached denials, if it keeps
// any (the gateway calls it when it swaps in a new policy). The leases'
// own cached denials belong to the limit they were taken for and end
// with it.
func (s *Store) PurgeDenials() {
	if p, ok := s.next.(interface{ PurgeDenials() }); ok {
		p.PurgeDenials()
	}
}

// selfTimed is a store that bounds each of its calls by a budget of its
// own (the Redis store).
type selfTimed interface{ CallTimeout() time.Duration }

// CallTimeout reports the budget next bounds each of its calls by, 0
// when it bounds none (then the caller's deadline must). The one wait of
// the hybrid store's own, for another request's lease call on the same
// key, is bounded by that budget too (waitLease), so a caller may pass
// no deadline of its own, as the gateway does for the Redis store.
func (s *Store) CallTimeout() time.Duration {
	if st, ok := s.next.(selfTimed); ok {
		return st.CallTimeout()
	}
	return 0
}

// Wrap returns New(next, o) as a ratelimit.Store that is also a
// ratelimit.Canceler exactly when next is, so that callers asking the
// store whether it can cancel a delay get next's answer. Delayed limits
// are never batched: Cancel goes to next as it is.
func Wrap(next ratelimit.Store, o Options) ratelimit.Store {
	s := New(next, o)
	if c, ok := next.(ratelimit.Canceler); ok {
		return canceling{s, c}
	}
	return s
}

type canceling struct {
	*Store
	c ratelimit.Canceler
}

// Cancel implements ratelimit.Canceler.
func (s canceling) Cancel(ctx context.Context, now time.Time, hits []ratelimit.Hit, ds []ratelimit.Decision) error {
	return s.c.Cancel(ctx, now, hits, ds)
}
