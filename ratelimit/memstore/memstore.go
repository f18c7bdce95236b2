// Package memstore is Tollgate's in-memory ratelimit.Store: counters live
// in this process, in power-of-two shards selected by hash/maphash, each a
// mutex over a bounded LRU (golang-lru simplelru).
//
// Memory is bounded by Options.MaxKeys: when a shard is full its least
// recently used key is evicted (an under-count for that key, reported by
// Evictions). Expiry is lazy: state whose every window has passed is
// treated as absent when it is next looked up and reclaimed then or when it
// reaches the LRU's cold end; the store runs no goroutine.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tollgate/gateway/ratelimit"
)

// DefaultMaxKeys is the key bound used when Options.MaxKeys is 0.
const DefaultMaxKeys = 1_000_000

// DefaultShards is the shard count used when Options.Shards is 0.
const DefaultShards = 64

// Options configure a Store.
type Options struct {
	// MaxKeys bounds the number of (limit, key) states held across all
	// shards. Default DefaultMaxKeys.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two and down to at most MaxKeys. Default DefaultShards.
	Shards int
}

// Store is an in-memory ratelimit.Store. It is safe for concurrent use.
type Store struct {
	seed   maphash.Seed
	mask   uint64
	shards []shard
}

var _ ratelimit.Store = (*Store)(nil)

// key identifies one state: the limit's ID and the hit's key, kept apart so
// that no concatenation is needed (and none is ambiguous).
type key struct {
	id, hit string
}

type shard struct {
	mu        sync.Mutex
	lru       *simplelru.LRU[key, cell]
	evictions atomic.Uint64
	_         [40]byte // keep hot shards on separate cache lines
}

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
	for n > maxKeys {
		n /= 2
	}
	s := &Store{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n)}
	per := maxKeys / n
	for i := range s.shards {
		lru, err := simplelru.NewLRU[key, cell](per, nil)
		if err != nil { // only for per ≤ 0, excluded above
			panic(err)
		}
		s.shards[i].lru = lru
	}
	return s
}

func (s *Store) shardOf(k key) int {
	h := maphash.String(s.seed, k.hit) ^ bits.RotateLeft64(maphash.String(s.seed, k.id), 17)
	return int(h & s.mask)
}

// get returns the live state at k, or nil when there is none or it has
// expired at now. An expired state is left in place (a denied request
// changes nothing, even for a caller whose clock is behind) and replaced
// when a fresh one is counted. The caller holds the shard's lock.
func (sh *shard) get(k key, now int64) cell {
	c, ok := sh.lru.Get(k)
	if !ok || now >= c.expiry() {
		return nil
	}
	return c
}

// add stores a new state, first reclaiming up to two expired states from
// the LRU's cold end. The caller holds the shard's lock.
func (sh *shard) add(k key, c cell, now int64) {
	for range 2 {
		_, old, ok := sh.lru.GetOldest()
		if !ok || now < old.expiry() {
			break
		}
		sh.lru.RemoveOldest()
	}
	if sh.lru.Add(k, c) {
		sh.evictions.Add(1)
	}
}

// batch is the per-Decide scratch space; small requests use the arrays and
// allocate nothing.
type batch struct {
	shardBuf [8]int
	orderBuf [8]int
	cellBuf  [8]cell
	freshBuf [8]bool
}

// Decide implements ratelimit.Store. All shards touched by hits are locked
// in ascending index order for the whole decision (a fixed order, so two
// decisions cannot deadlock, and holding them all makes the check and the
// count one atomic step). Hits that name the same limit and key share one
// state: each is checked with the cost of the earlier ones that would be
// counted added to its own.
func (s *Store) Decide(_ context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	if len(out) < len(hits) {
		return false, fmt.Errorf("memstore: %d decisions for %d hits", len(out), len(hits))
	}
	for i, h := range hits {
		if err := checkHit(h); err != nil {
			return false, fmt.Errorf("memstore: hit %d: %w", i, err)
		}
	}
	t := now.UnixMicro()
	var b batch
	shardOf, order, cells, fresh := b.shardBuf[:0], b.orderBuf[:0], b.cellBuf[:0], b.freshBuf[:0]
	if len(hits) > len(b.shardBuf) {
		shardOf, order = make([]int, 0, len(hits)), make([]int, 0, len(hits))
		cells, fresh = make([]cell, 0, len(hits)), make([]bool, 0, len(hits))
	}
	for _, h := range hits {
		shardOf = append(shardOf, s.shardOf(key{h.Limit.ID, h.Key}))
	}
	order = lockOrder(order, shardOf)
	for _, i := range order {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for j := len(order) - 1; j >= 0; j-- {
			s.shards[order[j]].mu.Unlock()
		}
	}()

	// Pass 1: check every hit without changing anything.
	allowed := true
	for i, h := range hits {
		k := key{h.Limit.ID, h.Key}
		cost := h.Cost
		var c cell
		isNew := false
		for j := range i {
			if hits[j].Limit.ID == k.id && hits[j].Key == k.hit {
				if c == nil {
					c, isNew = cells[j], fresh[j]
				}
				if !hits[j].Limit.Shadow || out[j].Allowed {
					cost += hits[j].Cost
				}
			}
		}
		if c == nil {
			if c = s.shards[shardOf[i]].get(k, t); c == nil {
				c, isNew = newCell(h.Limit, t), true
			}
		}
		cells, fresh = append(cells, c), append(fresh, isNew)
		c.check(h.Limit, t, cost, &out[i])
		if !out[i].Allowed && !h.Limit.Shadow {
			allowed = false
		}
	}

	// Pass 2: count if the request is allowed, then report.
	for i, h := range hits {
		d := &out[i]
		if allowed && (!h.Limit.Shadow || d.Allowed) {
			cells[i].take(h.Limit, t, h.Cost)
			d.Counted = true
			if fresh[i] {
				s.shards[shardOf[i]].add(key{h.Limit.ID, h.Key}, cells[i], t)
				for j := i + 1; j < len(hits); j++ {
					if cells[j] == cells[i] {
						fresh[j] = false
					}
				}
			}
		}
		cells[i].report(h.Limit, t, d)
	}
	return allowed, nil
}

// lockOrder writes the distinct shard indices of shardOf into order,
// ascending.
func lockOrder(order, shardOf []int) []int {
	for _, x := range shardOf {
		j := len(order)
		for j > 0 && order[j-1] > x {
			j--
		}
		if j > 0 && order[j-1] == x {
			continue
		}
		order = append(order, 0)
		copy(order[j+1:], order[j:])
		order[j] = x
	}
	return order
}

func checkHit(h ratelimit.Hit) error {
	switch {
	case h.Limit == nil:
		return errors.New("nil limit")
	case h.Limit.ID == "":
		return fmt.Errorf("limit %q not finished (empty ID)", h.Limit.Name)
	case h.Cost < 1:
		return fmt.Errorf("cost %d < 1", h.Cost)
	}
	return nil
}

// Release implements ratelimit.Store. A state evicted meanwhile is ignored.
func (s *Store) Release(_ context.Context, hits []ratelimit.Hit) error {
	for i, h := range hits {
		if err := checkHit(h); err != nil {
			return fmt.Errorf("memstore: hit %d: %w", i, err)
		}
		if h.Limit.Algorithm != ratelimit.Concurrency {
			continue
		}
		k := key{h.Limit.ID, h.Key}
		sh := &s.shards[s.shardOf(k)]
		sh.mu.Lock()
		if c, ok := sh.lru.Peek(k); ok && c.release(h.Cost) {
			sh.lru.Remove(k)
		}
		sh.mu.Unlock()
	}
	return nil
}

// Usage implements ratelimit.Store.
func (s *Store) Usage(_ context.Context, now time.Time, limit *ratelimit.Limit, hitKey string) ([]ratelimit.WindowUsage, error) {
	if err := checkHit(ratelimit.Hit{Limit: limit, Cost: 1}); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	t := now.UnixMicro()
	k := key{limit.ID, hitKey}
	out := make([]ratelimit.WindowUsage, limit.Windows())
	sh := &s.shards[s.shardOf(k)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, ok := sh.lru.Peek(k)
	if !ok || t >= c.expiry() {
		c = newCell(limit, t)
	}
	c.usage(limit, t, out)
	return out, nil
}

// Reset implements ratelimit.Store.
func (s *Store) Reset(_ context.Context, limit *ratelimit.Limit, hitKey string) error {
	if err := checkHit(ratelimit.Hit{Limit: limit, Cost: 1}); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	k := key{limit.ID, hitKey}
	sh := &s.shards[s.shardOf(k)]
	sh.mu.Lock()
	sh.lru.Remove(k)
	sh.mu.Unlock()
	return nil
}

// Close implements ratelimit.Store: it drops every state. The store stays
// usable (empty) afterwards.
func (s *Store) Close() error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.lru.Purge()
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
		n += sh.lru.Len()
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many live states were evicted because their shard
// was full.
func (s *Store) Evictions() uint64 {
	var n uint64
	for i := range s.shards {
		n += s.shards[i].evictions.Load()
	}
	return n
}
