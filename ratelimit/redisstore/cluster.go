package redisstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// hash tag — the part between the first "{" and the next "}" when that part
// is non-empty — or of the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster
// uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// groupBySlot returns the indices of keys grouped by slot, the groups in
// ascending slot order and the indices within a group ascending.
func groupBySlot(keys []string) [][]int {
	slots := make([]int, len(keys))
	for i, k := range keys {
		slots[i] = Slot(k)
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slots[a] - slots[b] })
	var groups [][]int
	for i, idx := range order {
		if i == 0 || slots[idx] != slots[order[i-1]] {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], idx)
	}
	return groups
}

// ownTag reports whether hit key k is "{T}T": its hash tag is the rest of
// the key, as for a limit not keyed by client (ARCHITECTURE.md "Counter
// keys"), whose counter many clients may share.
func ownTag(k string) bool {
	if len(k) < 3 || k[0] != '{' {
		return false
	}
	j := strings.IndexByte(k, '}')
	return j > 1 && k[1:j] == k[j+1:]
}

// sharedGroup reports whether every hit of group g has an own-tag key.
func sharedGroup(hits []ratelimit.Hit, g []int) bool {
	for _, i := range g {
		if !ownTag(hits[i].Key) {
			return false
		}
	}
	return true
}

// decideCluster decides hits whose keys may live in several slots. Keys of
// one client share a hash tag and so one slot; a limit keyed by something
// else (e.g. a shared `by = []` limit, key "{T}T") lives elsewhere. Each
// slot's hits are decided by one script, in a fixed order: slots holding a
// key that is not its own tag (one client's limits) first, then the slots
// of own-tag keys (shared by many clients), ascending slot within each. When
// a later slot denies, every earlier slot that counted is refunded (one
// script per slot) and its hits re-checked, so a denied request consumes
// nothing; the remaining slots are only checked. Deciding shared slots last
// makes their counts final: they are never held by a request that a later
// slot denies.
//
// A refund applies, per key, the inverse of what this request's count did,
// to the key's current state (ARCHITECTURE.md "Cluster refunds"): it gives
// back this request's units even when other requests changed the key in
// between, and never more than it took. The inverse operations run at the
// refund's instant: ratelimit.ClockStore reads TIME; ratelimit.ClockLocal uses now plus the time
// this call has taken so far.
//
// With inverse set, refunds always take the inverse path, even for a key
// untouched since (tests reach the inverse without concurrent traffic).
//
// Residual race: between an earlier slot's count and its refund (one round
// trip), other requests see those units as taken and may be denied although
// the request holding them ends up denied too (transient under-admission,
// never over-admission). This Store does not cache such a denial (holdSet);
// another gateway's may. Across slots the decision is not atomic: two slots
// are decided at two slightly different instants with ratelimit.ClockStore.
func (s *Store) decideCluster(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision, slots []uint64, inverse bool) (bool, error) {
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = s.Key(h.Limit, h.Key)
	}
	groups := groupBySlot(keys)
	if len(groups) == 1 {
		allowed, _, err := s.decideHits(ctx, s.client, modeDecide, now, hits, out, nil, slots)
		return allowed, err
	}
	// Shared slots last: their counts are then final, never held and
	// given back.
	slices.SortStableFunc(groups, func(a, b []int) int { return b2i(sharedGroup(hits, a)) - b2i(sharedGroup(hits, b)) })
	start := s.now()
	// Every slot but the last may count and then be refunded: its keys are
	// held until this call ends, and no denial on them is cached meanwhile.
	var held []string
	for _, g := range groups[:len(groups)-1] {
		for _, i := range g {
			held = append(held, keys[i])
		}
	}
	s.holds.add(held, 1, start, 0)
	defer func() { s.holds.add(held, -1, s.now(), 2*s.opts.Timeout) }()
	type done struct {
		idx   []int
		hits  []ratelimit.Hit
		out   []ratelimit.Decision
		slots []uint64
		t     taken
	}
	var counted []done
	// giveBack refunds d at the instant now plus the time spent so far.
	giveBack := func(ctx context.Context, d done) error {
		rf := &refund{t: d.t, at: now.Add(s.now().Sub(start)).UnixMicro(), inverse: inverse}
		_, _, err := s.decideHits(ctx, s.client, modeRefund, now, d.hits, d.out, rf, d.slots)
		if err == nil {
			s.stats.refunds.Add(1)
		}
		return err
	}
	allowed := true
	for _, g := range groups {
		gh := make([]ratelimit.Hit, len(g))
		for j, i := range g {
			gh[j] = hits[i]
		}
		gout := make([]ratelimit.Decision, len(g))
		var gslots []uint64
		if slots != nil {
			gslots = make([]uint64, len(g))
			for j, i := range g {
				gslots[j] = slots[i]
			}
		}
		mode := modeDecide
		if !allowed {
			mode = modeCheck
		}
		ok, t, err := s.decideHits(ctx, s.client, mode, now, gh, gout, nil, gslots)
		if err != nil {
			// Give back what earlier slots took, on a fresh budget: the
			// call's own may be spent. Best effort.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
			for _, d := range counted {
				_ = giveBack(rctx, d)
			}
			cancel()
			return false, err
		}
		for j, i := range g {
			out[i] = gout[j]
		}
		if mode == modeDecide && ok {
			counted = append(counted, done{g, gh, gout, gslots, t})
		}
		if !ok {
			allowed = false
		}
	}
	if allowed {
		return true, nil
	}
	// Refund and re-check every slot that counted, with one script each.
	for _, d := range counted {
		if err := giveBack(ctx, d); err != nil {
			return false, err
		}
		for j, i := range d.idx {
			out[i] = d.out[j]
		}
	}
	return false, nil
}

// holdSet records, per key, the cluster decisions of this Store in progress
// that may have counted on the key and may still refund it, and keeps a
// released key for a grace period. A denial computed while a key was held
// may be due to units about to be given back, so it is not cached: a
// decision that saw a hold checks within its own timeout of the release,
// so a grace of twice the store timeout covers it.
type holdSet struct {
	mu    sync.Mutex
	keys  map[string]*hold
	calls int
}

type hold struct {
	n     int       // decisions holding the key
	until time.Time // with n = 0: held until then (grace)
}

// add adds d to the hold count of every key at instant t; a key released
// to zero stays held until t + grace.
func (h *holdSet) add(keys []string, d int, t time.Time, grace time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[string]*hold)
	}
	for _, k := range keys {
		e := h.keys[k]
		if e == nil {
			e = &hold{}
			h.keys[k] = e
		}
		if e.n += d; e.n <= 0 {
			e.n, e.until = 0, t.Add(grace)
		}
	}
	if h.calls++; h.calls%1024 == 0 {
		for k, e := range h.keys {
			if e.n == 0 && !t.Before(e.until) {
				delete(h.keys, k)
			}
		}
	}
}

// held reports whether one of keys is held at instant t.
func (h *holdSet) held(keys func(yield func(string) bool), t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.keys) == 0 {
		return false
	}
	for k := range keys {
		if e := h.keys[k]; e != nil && (e.n > 0 || t.Before(e.until)) {
			return true
		}
	}
	return false
}
