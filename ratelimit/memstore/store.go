// Package memstore is Tollgate's in-memory ratelimit.Store: counters live
// in this process, in power-of-two shards selected by hash/maphash, each a
// mutex over a bounded table: an open-addressing index of the (limit, key)
// states, kept in least-recently-used order by an intrusive list (see
// table.go; BENCHMARKS.md explains every byte a key costs).
//
// Memory is bounded by Options.MaxKeys and Options.MaxBytes: when a shard
// holds more keys, or more bytes, than its share, its least recently used
// keys are evicted (an under-count for each, reported by Evictions):
// ordinary counters first, then penalty boxes (at most a quarter of a
// shard), then quota states (see evict). Bytes
// are accounted per key (entry, key, state and what the state points to,
// such as a log's ring), so keys whose state is large cannot take more
// memory than the bound however few they are. A held concurrency slot is
// never evicted (it would admit requests past max_in_flight), so held
// slots may take a shard past its bounds (they are bounded by the requests
// in flight). Expiry is lazy: state whose every window has passed is
// treated as absent when it is next looked up and reclaimed then or when it
// reaches the list's cold end; the store runs no goroutine. The table never
// shrinks: the memory of keys that left is reused by later keys.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// DefaultMaxKeys is the key bound used when Options.MaxKeys is 0.
const DefaultMaxKeys = 1_000_000

// DefaultShards is the shard count used when Options.Shards is 0.
const DefaultShards = 64

// minShardKeys is the fewest keys a shard is made to hold: room for a
// penalty box (a quarter of the shard, see maxBoxes) beside ordinary
// counters, so that a flood of fresh keys always finds an ordinary
// counter to evict before a box.
const minShardKeys = 4

// Options configure a Store.
type Options struct {
	// MaxKeys bounds the number of (limit, key) states held across all
	// shards, held concurrency slots aside (they are never evicted).
	// Default DefaultMaxKeys.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two and down until every shard holds at least minShardKeys
	// of MaxKeys (one shard below that). Default DefaultShards.
	Shards int
	// MaxBytes bounds the bytes accounted to the keys held across all
	// shards (each shard holds at most its share; a single key larger than
	// a share is kept alone). Default DefaultMaxBytes: a quarter of the
	// machine's memory.
	MaxBytes int64
}

// Store is an in-memory ratelimit.Store. It is safe for concurrent use.
type Store struct {
	seed   maphash.Seed
	shift  uint // shard = hash >> shift
	shards []shard
	// incarnations numbers the concurrency states: a state counted for the
	// first time gets the next number, and its slots carry it as their
	// Decision.Lease, so that a release reaches only the state it was
	// taken from (not one made after a Reset).
	incarnations atomic.Uint64
	// overrides is the override table (override.go).
	overrides overrideTable
}

var _ ratelimit.Store = (*Store)(nil)

// New returns an empty Store.
func New(o Options) *Store {
	maxKeys := o.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	n := o.Shards
	if n <= 0 {
		n = DefaultShards
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	for n > 1 && n*minShardKeys > maxKeys {
		n /= 2
	}
	maxBytes := o.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes()
	}
	s := &Store{seed: maphash.MakeSeed(), shift: uint(64 - bits.TrailingZeros(uint(n))), shards: make([]shard, n)}
	for i := range s.shards {
		s.shards[i].t = newTable()
		s.shards[i].max = maxKeys / n
		s.shards[i].maxBytes = maxBytes / int64(n)
	}
	return s
}

// hash returns the 64-bit hash of (limit ID, key): its top bits select the
// shard, its low 32 bits the home slot in the shard's index.
func (s *Store) hash(id, hit string) uint64 {
	return maphash.String(s.seed, hit) ^ bits.RotateLeft64(maphash.String(s.seed, id), 17)
}

func (s *Store) shardOf(h uint64) int { return int(h >> s.shift) }

// Release implements ratelimit.Store: it gives back the units of every
// counted Concurrency hit to the state that counted them (Decision.Lease
// names it). Held slots are never evicted (see evict), so the state is
// still there unless Reset or Close dropped it; then the units are gone
// with it, and a state made since is left alone.
func (s *Store) Release(_ context.Context, hits []ratelimit.Hit, ds []ratelimit.Decision) error {
	if len(ds) < len(hits) {
		return fmt.Errorf("memstore: %d decisions for %d hits", len(ds), len(hits))
	}
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("memstore: hit %d: %w", i, err)
		}
		if h.Limit.Algorithm != ratelimit.Concurrency || !ds[i].Counted {
			continue
		}
		hv := s.hash(h.Limit.ID, h.Key)
		sh := &s.shards[s.shardOf(hv)]
		sh.mu.Lock()
		if j := sh.t.find(uint32(hv), h.Limit.ID, h.Key); j != none && (ds[i].Lease == 0 || uint64(sh.t.at(j).st[1]) == ds[i].Lease) {
			cs := &inline[window.ConcurrencyState](sh.t.at(j))[0]
			cs.Release(h.Cost)
			if cs.InFlight == 0 {
				sh.t.remove(j)
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// Usage implements ratelimit.Store.
func (s *Store) Usage(_ context.Context, now time.Time, limit *ratelimit.Limit, hitKey string) ([]ratelimit.WindowUsage, error) {
	if err := (ratelimit.Hit{Limit: limit, Cost: 1}).Check(); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	t := now.UnixMicro()
	out := make([]ratelimit.WindowUsage, limit.Windows())
	hv := s.hash(limit.ID, hitKey)
	sh := &s.shards[s.shardOf(hv)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := kindOf(limit)
	if i := sh.t.find(uint32(hv), limit.ID, hitKey); i != none {
		st := sh.t.stateAt(i, k)
		if t < sh.t.expiryOf(&st, limit) {
			sh.t.apply(&st, opUsage, limit, &args{now: t, out: out})
			return out, nil
		}
	}
	st := sh.t.fresh(limit, k, t)
	sh.t.apply(&st, opUsage, limit, &args{now: t, out: out})
	sh.drop(st)
	return out, nil
}

// Reset implements ratelimit.Store. It also empties the key's penalty
// box, if the limit has one.
func (s *Store) Reset(_ context.Context, limit *ratelimit.Limit, hitKey string) error {
	if err := (ratelimit.Hit{Limit: limit, Cost: 1}).Check(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	hv := s.hash(limit.ID, hitKey)
	sh := &s.shards[s.shardOf(hv)]
	sh.mu.Lock()
	if i := sh.t.find(uint32(hv), limit.ID, hitKey); i != none {
		sh.t.remove(i)
	}
	sh.mu.Unlock()
	if box := limit.PenaltyBox(); box != nil {
		return s.Reset(context.Background(), box, hitKey)
	}
	return nil
}

// Close implements ratelimit.Store: it drops every state. The store stays
// usable (empty) afterwards.
func (s *Store) Close() error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.t.reset()
		sh.mu.Unlock()
	}
	return nil
}

// Len returns the number of states held, including expired ones not yet
// reclaimed.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.t.n
		sh.mu.Unlock()
	}
	return n
}

// Bytes returns the bytes charged to the states held (see Options.MaxBytes).
func (s *Store) Bytes() int64 {
	var n int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.t.bytes
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many live states were evicted because their shard
// was full (of keys or of bytes).
func (s *Store) Evictions() uint64 {
	var n uint64
	for i := range s.shards {
		n += s.shards[i].evictions.Load()
	}
	return n
}
