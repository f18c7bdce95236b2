package memstore

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

type shard struct {
	mu        sync.Mutex
	t         table
	max       int   // the most entries the table may hold
	maxBytes  int64 // the most bytes the table's keys may be charged
	evictions atomic.Uint64
	_         [64]byte // keep hot shards on separate cache lines
}

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
