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
	"math"
	"math/bits"
	"sync"
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

type shard struct {
	mu        sync.Mutex
	t         table
	max       int   // the most entries the table may hold
	maxBytes  int64 // the most bytes the table's keys may be charged
	evictions atomic.Uint64
	_         [64]byte // keep hot shards on separate cache lines
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

// lookup returns the state of (l, hit) in sh at now: the live entry
// (made most recently used), or a fresh state, with old set to the index
// of an expired entry of the same key (none when there is none). An
// expired state is left in place until a fresh one is counted, so a denied
// request changes nothing, even for a caller whose clock is behind. The
// caller holds the shard's lock.
func (sh *shard) lookup(l *ratelimit.Limit, hit string, h uint32, now int64) (st state, old int32, isNew bool) {
	t := &sh.t
	k := kindOf(l)
	if i := t.find(h, l.ID, hit); i != none {
		t.touch(i)
		t.at(i).lim = l
		st = t.stateAt(i, k)
		if now < t.expiryOf(&st, l) {
			return st, none, false
		}
		old = i
	} else {
		old = none
	}
	return t.fresh(l, k, now), old, true
}

// commitReplace stores the counted fresh state st over the expired entry
// old of the same key and returns where the state now is. It never evicts.
func (sh *shard) commitReplace(st state, old int32) state {
	t := &sh.t
	if st.k == kBox {
		t.boxes[t.at(old).st[0]] = st.c
	} else {
		t.at(old).st = t.at(st.idx).st
		t.release(st.idx, false)
	}
	st.idx = old
	if st.k == kBox {
		t.resize(old, keyBytes(t.at(old), kBox, st.c))
	}
	return st
}

// fit evicts least recently used keys while the shard's keys are charged
// more than its share of MaxBytes, keeping at least the most recent one
// and every held concurrency slot (see evict). It runs after a decision's
// counts and commits, so no state in use is pending.
func (sh *shard) fit(now int64) {
	t := &sh.t
	keep := [3]int32{t.head, t.bhead, t.qhead}
	for t.bytes > sh.maxBytes && t.n > 1 {
		if !sh.evict(now, keep) {
			return
		}
	}
}

// charge updates the bytes charged to the live entry holding boxed state
// st after a count, which may have grown it (a log's ring).
func (sh *shard) charge(st *state) {
	if st.k == kBox && st.idx != none {
		sh.t.resize(st.idx, keyBytes(sh.t.at(st.idx), kBox, st.c))
	}
}

// reclaimGrace is how long past its expiry a state is kept before it may be
// reclaimed to make room (it is still replaced, or evicted at capacity, as
// before). A state forgotten the moment it expired would make a clock that
// then steps back by a little see a fresh key where it should see the old
// state (e.g. a full bucket instead of an almost full one); a minute covers
// any step a wall clock takes in practice, and a different store (Redis,
// whose TTLs add a margin too) forgets no sooner.
const reclaimGrace = int64(time.Minute / ratelimit.Tick)

// commitNew links the counted fresh state st of a new key, first
// reclaiming up to two expired states from the cold end of the list, then
// evicting the least recently used state if the shard is still full.
func (sh *shard) commitNew(st state, l *ratelimit.Limit, hit string, h uint32, now int64) {
	t := &sh.t
	for _, tail := range [3]*int32{&t.tail, &t.btail, &t.qtail} {
		for range 2 {
			// Written as a subtraction from now: expiries may be ±MaxInt64.
			if *tail == none || now-reclaimGrace < t.expiry(*tail) {
				break
			}
			t.remove(*tail)
		}
	}
	if l.IsPenaltyBox() && t.nboxes >= sh.maxBoxes() {
		// Boxes past their share make room among themselves: a flood
		// of boxed keys cannot push out the ordinary counters.
		sh.evictFrom(now, noKeep, &t.btail)
	}
	if t.n >= sh.max {
		sh.evict(now, noKeep)
	}
	i := st.idx
	if st.k == kBox {
		i = t.alloc()
		t.at(i).st[0] = t.box(st.c)
	}
	e := t.at(i)
	e.hit, e.lim, e.hash = hit, l, h
	e.size = keyBytes(e, st.k, st.c)
	t.link(i)
}

// noKeep is evict's keep when no state must stay.
var noKeep = [3]int32{none, none, none}

// maxBoxes is the most penalty boxes the shard holds: a quarter of its
// keys (at least one). A new box past it evicts the least recently used
// box, so however many keys a flood gets boxed, three quarters of the
// shard stay for the other states.
func (sh *shard) maxBoxes() int { return max(1, sh.max/4) }

// evict removes the least recently used state that is neither in keep nor
// a held concurrency slot, and reports whether there was one: evicting a
// held slot would forget units that are in flight, and the next requests
// would be admitted past max_in_flight. Held slots met on the way are
// moved to the head of the list, so the next eviction does not walk them
// again. When every state of the shard is a held slot nothing is evicted
// and the shard grows past its bounds: held slots are bounded by the
// requests in flight, not by what clients send, so a shard holds at most
// max(its key bound, held slots + 1) states. Penalty boxes and quota
// states live in lists of their own and are evicted only when the main
// list has nothing to evict, boxes first: a forgotten quota gives its key
// a new period (up to a month's worth of units), a forgotten box lets its
// client out early (still limited by the limit itself), a forgotten rate
// window gives a few seconds' worth.
func (sh *shard) evict(now int64, keep [3]int32) bool {
	t := &sh.t
	for _, tail := range [3]*int32{&t.tail, &t.btail, &t.qtail} {
		if sh.evictFrom(now, keep, tail) {
			return true
		}
	}
	return false
}

// evictFrom is evict on the one list whose tail is tail.
func (sh *shard) evictFrom(now int64, keep [3]int32, tail *int32) bool {
	t := &sh.t
	for range t.n {
		i := *tail
		if i == none {
			break
		}
		if l := t.at(i).lim; i == keep[0] || i == keep[1] || i == keep[2] || l.Algorithm == ratelimit.Concurrency && t.expiry(i) == math.MaxInt64 {
			if head, _ := t.ends(i); *head == i {
				break // the list holds nothing else
			}
			t.touch(i)
			continue
		}
		if now < t.expiry(i) {
			sh.evictions.Add(1)
		}
		t.remove(i)
		return true
	}
	return false
}

// drop gives back the reserved entry of a fresh state that was not
// counted.
func (sh *shard) drop(st state) {
	if st.k != kBox {
		sh.t.release(st.idx, false)
	}
}

// slot is the per-hit working state of one Decide.
type slot struct {
	hash  uint64
	shard int
	first int // index of the first hit with the same limit and key (itself if none)
	st    state
	old   int32
	isNew bool
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
		if err := h.Check(); err != nil {
			return false, fmt.Errorf("memstore: hit %d: %w", i, err)
		}
	}
	t := now.UnixMicro()
	if hasPenalty(hits) {
		return s.decidePenalties(hits, t, out), nil
	}
	if len(hits) == 1 {
		return s.decideOne(hits[0], t, &out[0]), nil
	}
	return s.decideMany(hits, t, out, false), nil
}

// decideMany is Decide for any number of hits; with deny set the request
// is denied whatever the hits decide, and nothing is counted.
func (s *Store) decideMany(hits []ratelimit.Hit, t int64, out []ratelimit.Decision, deny bool) bool {
	var slotBuf [8]slot
	var orderBuf [8]int
	slots, order := slotBuf[:0], orderBuf[:0]
	if len(hits) > len(slotBuf) {
		slots, order = make([]slot, 0, len(hits)), make([]int, 0, len(hits))
	}
	for i, h := range hits {
		hv := s.hash(h.Limit.ID, h.Key)
		first := i
		for j := range i {
			if hits[j].Limit.ID == h.Limit.ID && hits[j].Key == h.Key {
				first = j
				break
			}
		}
		slots = append(slots, slot{hash: hv, shard: s.shardOf(hv), first: first})
		order = insertShard(order, slots[i].shard)
	}
	for _, i := range order {
		s.shards[i].mu.Lock()
	}

	// Pass 1: check every hit without changing anything.
	allowed := !deny
	for i, h := range hits {
		sl := &slots[i]
		sh := &s.shards[sl.shard]
		cost := h.Cost
		if sl.first == i {
			sl.st, sl.old, sl.isNew = sh.lookup(h.Limit, h.Key, uint32(sl.hash), t)
		} else {
			for j := sl.first; j < i; j++ {
				if slots[j].first == sl.first && (!hits[j].Limit.Shadow || out[j].Allowed) {
					cost += hits[j].Cost
				}
			}
		}
		if h.Mode == ratelimit.HitTake {
			out[i] = ratelimit.Decision{Allowed: true}
			continue
		}
		sh.t.apply(&slots[sl.first].st, opCheck, h.Limit, &args{now: t, cost: cost, d: &out[i]})
		window.Reserve(h.Limit, h.Mode, &out[i])
		if !out[i].Allowed && !h.Limit.Shadow {
			allowed = false
		}
	}

	// Pass 2: count if the request is allowed, then report (fresh states
	// are still outside the tables, so no eviction can touch a state in use).
	counted := false
	for i, h := range hits {
		d := &out[i]
		st := &slots[slots[i].first].st
		t2 := &s.shards[slots[i].shard].t
		if allowed && (!h.Limit.Shadow || d.Allowed) && h.Mode != ratelimit.HitPeek {
			take(t2, st, h.Limit, t, h.Cost, d)
			d.Counted, counted = true, true
			if st.k == kConc {
				d.Lease = s.incarnation(t2.at(st.idx))
			}
			if !slots[slots[i].first].isNew {
				s.shards[slots[i].shard].charge(st)
			}
		}
		// No cost: another hit of the request may have counted on a
		// state this one shares since its Check, so the report reuses
		// nothing of it (window.ReportChecked).
		t2.apply(st, opReport, h.Limit, &args{now: t, d: d})
	}

	// Pass 3: store the fresh states that were counted and drop the rest;
	// replacements first (they never evict), then new keys.
	for pass := range 2 {
		for i, h := range hits {
			sl := &slots[i]
			if sl.first != i || !sl.isNew || (sl.old == none) == (pass == 0) {
				continue
			}
			sh := &s.shards[sl.shard]
			if !counted || !wasCounted(slots, out, i) {
				sh.drop(sl.st)
				continue
			}
			if sl.old != none {
				sl.st = sh.commitReplace(sl.st, sl.old)
			} else {
				sh.commitNew(sl.st, h.Limit, h.Key, uint32(sl.hash), t)
			}
		}
	}
	if counted {
		for _, j := range order {
			s.shards[j].fit(t)
		}
	}
	for j := len(order) - 1; j >= 0; j-- {
		s.shards[order[j]].mu.Unlock()
	}
	return allowed
}

// wasCounted reports whether any hit sharing hit first's state counted.
func wasCounted(slots []slot, out []ratelimit.Decision, first int) bool {
	for j := first; j < len(slots); j++ {
		if slots[j].first == first && out[j].Counted {
			return true
		}
	}
	return false
}

// decideOne is Decide for a single hit: one shard, no sharing.
func (s *Store) decideOne(h ratelimit.Hit, t int64, d *ratelimit.Decision) bool {
	hv := s.hash(h.Limit.ID, h.Key)
	sh := &s.shards[s.shardOf(hv)]
	sh.mu.Lock()
	st, old, isNew := sh.lookup(h.Limit, h.Key, uint32(hv), t)
	a := args{now: t, cost: h.Cost, d: d}
	if h.Mode == ratelimit.HitTake {
		*d = ratelimit.Decision{Allowed: true}
	} else {
		sh.t.apply(&st, opCheck, h.Limit, &a)
		window.Reserve(h.Limit, h.Mode, d)
	}
	// A shadow limit never denies the request, and counts only what it
	// allowed itself.
	allowed, counted := d.Allowed || h.Limit.Shadow, d.Allowed && h.Mode != ratelimit.HitPeek
	if counted {
		take(&sh.t, &st, h.Limit, t, h.Cost, d)
		d.Counted = true
		if st.k == kConc {
			d.Lease = s.incarnation(sh.t.at(st.idx))
		}
		if !isNew {
			sh.charge(&st)
		}
	}
	sh.t.apply(&st, opReport, h.Limit, &a)
	switch {
	case !isNew:
	case !counted:
		sh.drop(st)
	case old != none:
		sh.commitReplace(st, old)
	default:
		sh.commitNew(st, h.Limit, h.Key, uint32(hv), t)
	}
	if counted {
		sh.fit(t)
	}
	sh.mu.Unlock()
	return allowed
}

// incarnation returns the number of the concurrency state in e (kept in
// the entry's second word, beside the count), numbering it first if it has
// none.
func (s *Store) incarnation(e *entry) uint64 {
	if e.st[1] == 0 {
		e.st[1] = int64(s.incarnations.Add(1))
	}
	return uint64(e.st[1])
}

// insertShard adds shard x to the ascending list of distinct shards order.
func insertShard(order []int, x int) []int {
	j := len(order)
	for j > 0 && order[j-1] > x {
		j--
	}
	if j > 0 && order[j-1] == x {
		return order
	}
	order = append(order, 0)
	copy(order[j+1:], order[j:])
	order[j] = x
	return order
}

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
