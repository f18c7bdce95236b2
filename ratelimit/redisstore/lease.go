package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

//go:embed renew.lua
var renewSrc string

// Concurrency slots on Redis carry leases (lua/concurrency.lua): every
// slot is a member of its key's sorted set, scored with the instant its
// lease ends on the Redis server's clock. This file is the
// holder's side: the slots this Store holds, renewed in one batch every
// third of a lease, and the releases that could not reach Redis, retried
// until they land or their lease has ended (whichever comes first; after
// that Redis drops the slot by itself).

// slotBatch is the most slots one renew or release script call carries.
const slotBatch = 256

// leaseSlot is one slot this Store holds or still has to give back.
type leaseSlot struct {
	key, member string
	// until is when the slot's lease ends at the latest, on this process's
	// clock (the last renewal plus the lease and the TTL margin, which
	// absorbs the skew between this clock and the server's).
	until time.Time
}

// leases is the holder's state: the slots held and the releases pending.
type leases struct {
	holder [8]byte       // random: this Store's part of every member
	seq    atomic.Uint64 // the last slot id handed out
	mu     sync.Mutex    // guards held, pending, retrying
	held   map[uint64]*leaseSlot
	// pending are the releases that failed, oldest first, at most
	// Options.MaxPendingReleases.
	pending []leaseSlot
	// retrying counts the pending releases a retry has taken out of the
	// queue and not yet settled: they are still pending (Stats counts
	// them), so that the figure does not read 0 while a retry waits on a
	// Redis that has not answered yet.
	retrying int
	start    sync.Once
	stop     chan struct{}
	done     chan struct{}

	renewals, lost, retried, dropped atomic.Uint64
}

func (l *leases) init() {
	if _, err := rand.Read(l.holder[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	l.held = make(map[uint64]*leaseSlot)
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
}

// member returns the sorted-set member of slot seq of cost units: the cost
// (lua/concurrency.lua reads it back when the lease ends), this Store's holder id
// and the slot id.
func (s *Store) member(cost int64, seq uint64) string {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[:8], math.Float64bits(float64(cost)))
	copy(b[8:16], s.leases.holder[:])
	binary.LittleEndian.PutUint64(b[16:], seq)
	return string(b[:])
}

// newSlots returns a slot id per concurrency hit of hits (0 for the other
// hits), or nil when there is none.
func (s *Store) newSlots(hits []ratelimit.Hit) []uint64 {
	var slots []uint64
	for i, h := range hits {
		if h.Limit.Algorithm != ratelimit.Concurrency {
			continue
		}
		if slots == nil {
			slots = make([]uint64, len(hits))
		}
		slots[i] = s.leases.seq.Add(1)
	}
	return slots
}

// hold records the slots that out says were counted, so that they are
// renewed until released, and sets their Decision.Lease.
func (s *Store) hold(hits []ratelimit.Hit, out []ratelimit.Decision, slots []uint64) {
	until := s.now().Add(s.opts.LeaseTTL + s.opts.TTLMargin)
	first := true
	for i, h := range hits {
		if slots[i] == 0 || !out[i].Counted {
			continue
		}
		out[i].Lease = slots[i]
		if first {
			s.leases.mu.Lock()
			first = false
		}
		s.leases.held[slots[i]] = &leaseSlot{key: s.Key(h.Limit, h.Key), member: s.member(h.Cost, slots[i]), until: until}
	}
	if !first {
		s.leases.mu.Unlock()
		s.startLeases()
	}
}

// giveBackLater queues the release of every concurrency slot of hits that
// a failed decide call may have counted (its reply was lost): a release of
// a slot never taken gives back nothing.
func (s *Store) giveBackLater(hits []ratelimit.Hit, slots []uint64) {
	until := s.now().Add(s.opts.LeaseTTL + s.opts.TTLMargin)
	var q []leaseSlot
	for i, h := range hits {
		if slots[i] != 0 {
			q = append(q, leaseSlot{key: s.Key(h.Limit, h.Key), member: s.member(h.Cost, slots[i]), until: until})
		}
	}
	s.queue(q)
}

// queue adds releases to the pending queue, dropping (and counting) those
// past its bound: their slots stay held until their lease ends.
func (s *Store) queue(q []leaseSlot) int {
	s.leases.mu.Lock()
	room := max(s.opts.MaxPendingReleases-len(s.leases.pending), 0)
	n := min(room, len(q))
	s.leases.pending = append(s.leases.pending, q[:n]...)
	s.leases.mu.Unlock()
	if n < len(q) {
		s.leases.dropped.Add(uint64(len(q) - n))
	}
	if n > 0 {
		s.startLeases()
	}
	return len(q) - n
}

// ErrReleaseDropped is returned by Release when Redis could not be reached
// and the queue of pending releases is full: the slots stay held until
// their lease ends.
var ErrReleaseDropped = errors.New("concurrency release dropped: pending queue full")

// Release implements ratelimit.Store: it gives back the slots that ds
// counted, by their members (idempotent). A release that cannot reach
// Redis is queued and retried in the background until it lands or the
// slot's lease has ended, so a blip does not hold slots for a whole lease;
// Release then returns nil. It returns an error only when the queue is
// full (ErrReleaseDropped) or a hit is invalid.
func (s *Store) Release(ctx context.Context, hits []ratelimit.Hit, ds []ratelimit.Decision) error {
	if len(ds) < len(hits) {
		return fmt.Errorf("redisstore: %d decisions for %d hits", len(ds), len(hits))
	}
	var q []leaseSlot
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
		if h.Limit.Algorithm != ratelimit.Concurrency || !ds[i].Counted || ds[i].Lease == 0 {
			continue
		}
		s.leases.mu.Lock()
		ls := s.leases.held[ds[i].Lease]
		delete(s.leases.held, ds[i].Lease)
		s.leases.mu.Unlock()
		if ls == nil {
			// Not held here (released already, or another Store's):
			// releasing it again would be a no-op at best.
			continue
		}
		q = append(q, *ls)
	}
	if len(q) == 0 {
		return nil
	}
	err := s.call(ctx, func(ctx context.Context) error { return s.releaseSlots(ctx, q) })
	if err == nil {
		return nil
	}
	if s.queue(q) > 0 {
		return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, ErrReleaseDropped)
	}
	return nil
}

// releaseSlots runs release.lua (runScript) for q: one call per batch on a standalone
// server, one per slot and batch on a Cluster.
func (s *Store) releaseSlots(ctx context.Context, q []leaseSlot) error {
	return s.eachBatch(q, func(keys []string, args []any) error {
		return s.runScript(ctx, s.client, "release", s.release, keys, args...).Err()
	})
}

// eachBatch calls f with the keys and members of q in batches that one
// script call may carry: at most slotBatch, and on a Cluster of one hash
// slot.
func (s *Store) eachBatch(q []leaseSlot, f func(keys []string, members []any) error) error {
	groups := [][]int{nil}
	if s.cluster {
		keys := make([]string, len(q))
		for i := range q {
			keys[i] = q[i].key
		}
		groups = groupBySlot(keys)
	} else {
		for i := range q {
			groups[0] = append(groups[0], i)
		}
	}
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), slotBatch)
			keys, members := make([]string, n), make([]any, n)
			for j, i := range g[:n] {
				keys[j], members[j] = q[i].key, q[i].member
			}
			if err := f(keys, members); err != nil {
				return err
			}
			g = g[n:]
		}
	}
	return nil
}

// startLeases starts the background loop once, on the first slot held or
// release queued.
func (s *Store) startLeases() {
	s.leases.start.Do(func() { go s.leaseLoop() })
}

// leaseLoop renews the held slots every third of a lease and retries the
// pending releases every tick, until Close.
func (s *Store) leaseLoop() {
	defer close(s.leases.done)
	tick := min(250*time.Millisecond, s.opts.LeaseTTL/8)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastRenew := s.now()
	for {
		select {
		case <-s.leases.stop:
			return
		case <-t.C:
		}
		s.retryReleases()
		if now := s.now(); now.Sub(lastRenew) >= s.opts.LeaseTTL/3 {
			if s.renew() == nil {
				lastRenew = now
			}
		}
	}
}

// background bounds one background call: the store's timeout, but at least
// half a second (nobody waits on it, and a loaded server should not make it
// fail).
func (s *Store) background() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), max(s.opts.Timeout, 500*time.Millisecond))
}

// retryReleases sends the pending releases whose lease has not ended;
// those that fail stay queued for the next tick. It bypasses the breaker:
// it is one call per tick, and should land the moment Redis answers.
func (s *Store) retryReleases() {
	s.leases.mu.Lock()
	if len(s.leases.pending) == 0 {
		s.leases.mu.Unlock()
		return
	}
	now := s.now()
	q := make([]leaseSlot, 0, len(s.leases.pending))
	for _, p := range s.leases.pending {
		if now.Before(p.until) {
			q = append(q, p)
		} else {
			s.leases.dropped.Add(1) // its lease has ended: Redis drops it
		}
	}
	s.leases.pending = s.leases.pending[:0]
	s.leases.retrying = len(q)
	s.leases.mu.Unlock()
	if len(q) == 0 {
		return
	}
	ctx, cancel := s.background()
	defer cancel()
	if s.releaseSlots(ctx, q) == nil {
		s.leases.mu.Lock()
		s.leases.retried.Add(uint64(len(q)))
		s.leases.retrying = 0
		s.leases.mu.Unlock()
		return
	}
	// Requeue them all, before anything queued meanwhile: a release is
	// idempotent, so batches that did land may be sent again.
	s.leases.mu.Lock()
	s.leases.retrying = 0
	s.leases.pending = append(q, s.leases.pending...)
	if over := len(s.leases.pending) - s.opts.MaxPendingReleases; over > 0 {
		s.leases.pending = s.leases.pending[over:]
		s.leases.dropped.Add(uint64(over))
	}
	s.leases.mu.Unlock()
}

// renew extends the lease of every slot held, in batches.
func (s *Store) renew() error {
	s.leases.mu.Lock()
	if len(s.leases.held) == 0 {
		s.leases.mu.Unlock()
		return nil
	}
	q := make([]leaseSlot, 0, len(s.leases.held))
	ids := make([]uint64, 0, len(s.leases.held))
	for id, ls := range s.leases.held {
		q = append(q, *ls)
		ids = append(ids, id)
	}
	s.leases.mu.Unlock()
	until := s.now().Add(s.opts.LeaseTTL + s.opts.TTLMargin)
	ctx, cancel := s.background()
	defer cancel()
	head := []any{s.opts.LeaseTTL.Milliseconds(), s.opts.TTLMargin.Milliseconds()}
	err := s.eachBatch(q, func(keys []string, members []any) error {
		lost, err := s.runScript(ctx, s.client, "renew", s.renewScript, keys, append(head[:2:2], members...)...).Int64()
		if err == nil {
			s.leases.lost.Add(uint64(lost))
		}
		return err
	})
	if err != nil {
		return err
	}
	s.leases.renewals.Add(1)
	s.leases.mu.Lock()
	for _, id := range ids {
		if ls := s.leases.held[id]; ls != nil {
			ls.until = until
		}
	}
	s.leases.mu.Unlock()
	return nil
}

// closeLeases stops the background loop and makes one last attempt at the
// pending releases.
func (s *Store) closeLeases() {
	s.leases.mu.Lock()
	select {
	case <-s.leases.stop:
		s.leases.mu.Unlock()
		return
	default:
		close(s.leases.stop)
	}
	s.leases.mu.Unlock()
	s.leases.start.Do(func() { close(s.leases.done) }) // never started
	<-s.leases.done
	s.retryReleases()
}
