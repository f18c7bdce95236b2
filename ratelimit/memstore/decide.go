package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

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
		sh.t.apply(&slots[sl.first].st, opCheck, h.Limit, &args{now: t, cost: cost, value: h.Value, d: &out[i]})
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
			take(t2, st, h.Limit, t, h.Cost, h.Value, d)
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
	a := args{now: t, cost: h.Cost, value: h.Value, d: d}
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
		take(&sh.t, &st, h.Limit, t, h.Cost, h.Value, d)
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
