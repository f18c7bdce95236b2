// Package hybrid is a ratelimit.Store that decides the hits of batched
// limits (ratelimit.Limit.Batch) from leases: each gateway takes a slice of
// a key's budget from the shared store ahead of use (one store decision of
// the lease's size) and admits from it locally, so that a hot key costs
// the store about one call per lease instead of one per request. Every
// other hit goes to the wrapped store unchanged, in the same call when a
// request mixes both, so a request is still all-or-nothing.
//
// A gateway admits only units the store has counted, so the fleet never
// admits more than the store would have counted: a fixed window admits at
// most its limit per window for any number of gateways; a sliding window
// counter, whose units are counted up to one lease earlier than used, may
// admit up to N·(k−1) units past its estimate with N gateways and leases of
// at most k units. Units leased and not used before the lease ends (after
// Batch.Interval, a reload, Flush) are given back to the window or bucket
// they were counted in (named by the store's instant of the count,
// Decision.At, when it decides on its own clock), when the wrapped store
// is a ratelimit.Returner, in one call and never retried; a lease that ends with its fixed window
// gives back nothing (the window is gone). See ARCHITECTURE.md "Hybrid
// counting".
//
// The package knows nothing of HTTP and reads no clock: leases age on the
// instants passed to Decide.
package hybrid

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
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

type shard struct {
	mu sync.Mutex
	m  map[leaseKey]*lease
	// calm is the instant before which a sweep of a full shard finds
	// nothing to drop: at most the earliest end among its entries (set by
	// a sweep, lowered when an entry is added or its end moves earlier).
	// A flood of new keys at a full table is then decided exactly without
	// a walk of the whole shard per request. sweeps counts the walks.
	calm   int64
	sweeps uint64
}

type leaseKey struct{ id, key string }

// lease is one gateway's slice of one key's budget, or its cached denial.
// Instants are ticks (µs) on the clock of the Decide calls, but counted and
// prevCounted, on the store's.
type lease struct {
	lim   *ratelimit.Limit // the limit it was taken for (a reload replaces it)
	units int64            // units left to admit locally
	until int64            // the instant the units stop being admissible
	size  int64            // the size of the last lease taken
	used  int64            // units admitted since the last lease was taken
	// The store's report when the lease was taken at instant at: what it
	// had left beyond the lease, and its reset. counted is the instant
	// the store counted the lease at, on its clock (Decision.At; at when
	// the store decides on the caller's clock): the give-back names the
	// window or bucket of counted, while at ages the lease here.
	remaining, capacity int64
	reset               time.Duration
	at, counted         int64
	// gen counts the leases settled into l: a unit reserved from one
	// lease and given back after the next was settled (its request
	// denied) must not join the next one's units.
	gen uint64
	// When a lease was taken while earlier ones still held units, prev
	// is how many they held, counted at prevAt (prevCounted on the
	// store's clock) or later; a give-back returns up to prev units at
	// prevCounted, the rest at counted.
	prev, prevAt, prevCounted int64
	// A denial of the hit at its own cost, repeated locally until
	// denyUntil.
	denyUntil, deniedAt int64
	deny                ratelimit.Decision
	// pending, while a request's store call takes a lease for the key,
	// is closed when it is settled: the key's other requests wait for it
	// instead of each asking the store (a burst on a hot key would
	// otherwise send one call per request until the first lease lands).
	pending chan struct{}
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

func (s *Store) shard(k leaseKey) *shard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.id)
	h.WriteByte(0)
	h.WriteString(k.key)
	return &s.shards[h.Sum64()%nShards]
}

// kinds of plan
const (
	exact   = iota // sent to the wrapped store as it is
	local          // admitted from the lease (units reserved)
	denied         // denied from the cached denial
	leasing        // sent to the wrapped store as a lease of size
	waiting        // another request is taking a lease for the key: wait on ch
)

// plan is what Decide does with one hit.
type plan struct {
	kind int
	size int64
	l    *lease
	sh   *shard
	// gen is, for local, l.gen when the units were reserved.
	gen uint64
	// ch is, for leasing, the pending channel this request owns (nil if
	// another request's lease was pending and this one could not wait);
	// for waiting, the channel to wait on.
	ch chan struct{}
	// back is the unused units of an ended lease of the key, given back
	// when the request is decided.
	back []giveBack
}

// giveBack is units to give back: hit.Cost units of hit counted at at
// (on the store's clock).
type giveBack struct {
	hit ratelimit.Hit
	at  int64
}

// Decide implements ratelimit.Store.
func (s *Store) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	batched := false
	for _, h := range hits {
		if leased(h) {
			batched = true
			break
		}
	}
	if !batched {
		return s.next.Decide(ctx, now, hits, out)
	}
	if len(out) < len(hits) {
		return false, fmt.Errorf("hybrid: %d decisions for %d hits", len(out), len(hits))
	}
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return false, fmt.Errorf("hybrid: hit %d: %w", i, err)
		}
	}
	t := now.UnixMicro()
	plans := make([]plan, len(hits))
	defer s.unblock(plans)
	defer s.giveBack(ctx, now, plans)
	anyStore, anyDenied, owns := false, false, false
	for i, h := range hits {
		if !leased(h) {
			anyStore = true
			continue
		}
		for {
			// A request that owns a pending lease never waits for
			// another's, so waiters own nothing and cannot wait in a
			// cycle.
			plans[i] = s.reserve(h, t, !owns)
			if plans[i].kind != waiting {
				break
			}
			if err := s.waitLease(ctx, plans[i].ch); err != nil {
				plans[i] = plan{}
				for j := range i {
					s.rollback(hits[j], plans[j], out, j, t)
				}
				return false, fmt.Errorf("hybrid: %w: waiting for a lease: %w", ratelimit.ErrStore, err)
			}
		}
		owns = owns || plans[i].ch != nil
		switch plans[i].kind {
		case exact, leasing:
			anyStore = true
		case denied:
			anyDenied = true
		}
	}
	if anyDenied && !anyStore {
		// Every hit decided locally and one denies: nothing counted.
		for i, h := range hits {
			s.rollback(h, plans[i], out, i, t)
		}
		return false, nil
	}
	if !anyStore {
		for i, h := range hits {
			sh := plans[i].sh
			sh.mu.Lock()
			out[i] = plans[i].l.report(h, t, true)
			sh.mu.Unlock()
		}
		s.stats.local.Add(uint64(len(hits)))
		return true, nil
	}
	return s.decideStore(ctx, now, t, hits, out, plans)
}

// leased reports whether h is decided from leases: a counted hit of a
// batched limit (a peek or a take goes to the store as it is).
func leased(h ratelimit.Hit) bool {
	return h.Limit != nil && h.Limit.Batch != nil && h.Mode == ratelimit.HitCount
}

// reserve plans hit h at instant t. For a local admission the units are
// taken at once. No lock is held on return: two hits of one request may
// share a shard.
func (s *Store) reserve(h ratelimit.Hit, t int64, mayWait bool) plan {
	k := leaseKey{h.Limit.ID, h.Key}
	sh := s.shard(k)
	sh.mu.Lock()
	l := sh.m[k]
	var back []giveBack
	if l != nil && l.lim != h.Limit {
		// Reloaded: the units were counted under the same ID, but the
		// lease's sizes and bounds belong to the old definition. Its
		// unused units go back under the old one (its windows).
		back = l.takeBack(k.key, t)
		l = nil
		delete(sh.m, k)
	}
	if l == nil {
		if len(sh.m) >= s.perMax && t >= sh.calm {
			// The ended leases it drops give their units back with
			// this request.
			back = append(back, sh.sweep(t)...)
		}
		if len(sh.m) >= s.perMax {
			sh.mu.Unlock()
			s.stats.exact.Add(1)
			return plan{kind: exact, back: back}
		}
		l = &lease{lim: h.Limit}
		sh.m[k] = l
		sh.calm = min(sh.calm, t) // it holds nothing yet
	}
	defer sh.mu.Unlock()
	if l.steppedBack(t) {
		// The lease and the denial end now: this request asks the store
		// (an ended lease's units go back below). The entry stays, so a
		// lease call in flight for it still settles into it.
		l.until, l.denyUntil = min(l.until, t), min(l.denyUntil, t)
	}
	switch {
	case t < l.denyUntil:
		return plan{kind: denied, l: l, sh: sh}
	case t < l.until && l.units >= h.Cost:
		l.units -= h.Cost
		l.used += h.Cost
		return plan{kind: local, l: l, sh: sh, gen: l.gen}
	}
	if l.pending != nil && mayWait {
		return plan{kind: waiting, ch: l.pending}
	}
	var ch chan struct{}
	if l.pending == nil {
		ch = make(chan struct{})
		l.pending = ch
	}
	size := h.Cost
	switch {
	case l.size == 0:
		// The first lease of a key is just the request: a key seen once
		// strands nothing.
	case t < l.until:
		// Used up before it ended: double.
		size = max(size, 2*l.size)
	case l.units == 0:
		// Used up, then ended: the same again.
		size = max(size, l.size)
	default:
		// Ended with units left: what it admitted, so that a key whose
		// requests come slower than the interval strands nothing.
		size = max(size, l.used)
	}
	size = min(size, max(h.Cost, min(h.Limit.Batch.Lease, h.Limit.Rates[0].Limit)))
	if back == nil && t >= l.until {
		// The lease has ended: what it did not admit goes back (sized
		// above from l.units and l.used, which settle resets).
		back = l.takeBack(k.key, t)
	}
	return plan{kind: leasing, size: size, l: l, sh: sh, ch: ch, back: back}
}

// stepSlack is how far before the instant a lease or denial was taken a
// request's instant may be without the clock counting as stepped back
// (when the interval is shorter): a request carries the instant it
// started at, and may have waited for a lease call or the CPU since.
const stepSlack = time.Second

// steppedBack reports whether t is more than an interval (at least
// stepSlack) before the instant l's lease or denial was taken: the clock
// of the Decide calls (the gateway's wall clock) stepped back. Leases and
// denials age on that clock, so without this a step back of an hour would
// repeat a denial (or admit from a lease whose window the store has
// closed) for an hour, while the store, on its own clock, has long moved
// on. A smaller step extends a lease or a denial by at most the slack.
func (l *lease) steppedBack(t int64) bool {
	return t < max(l.at, l.deniedAt)-int64(max(l.lim.Batch.Interval, stepSlack)/ratelimit.Tick)
}

// takeBack ends l at t and removes its unused units, returning them as
// hits of the lease's limit to give back with the instants they were
// counted. Units held from an earlier lease (prev) go back to that
// lease's instant first: whichever units were admitted, each was counted
// at one of the two instants, and no bucket gets back more of this
// gateway's units than it counted. Nothing is returned when there is
// nothing worth a call: a fixed window that has ended (the store has
// dropped it and takes nothing back into a later one), a sliding
// counter's bucket that has left the window. Whether it has is judged on
// this gateway's clock (at, prevAt against t); the units go back to the
// instants the store counted them at (counted, prevCounted), on its
// clock, which decides again whether the window or bucket still holds
// them. The shard lock is held.
func (l *lease) takeBack(key string, t int64) []giveBack {
	n := l.units
	if n <= 0 {
		return nil
	}
	l.units = 0
	l.until = min(l.until, t)
	var out []giveBack
	add := func(c, at, counted int64) {
		live := t < at+int64(l.lim.Rates[0].Window/ratelimit.Tick)
		if l.lim.Algorithm == ratelimit.FixedWindow {
			// l.reset is the store's reset reported for the lease at
			// l.at; a merged earlier lease is in the same window.
			live = t < l.at+int64(l.reset/ratelimit.Tick)
		}
		if c > 0 && live {
			out = append(out, giveBack{ratelimit.Hit{Limit: l.lim, Key: key, Cost: c}, counted})
		}
	}
	old := min(n, l.prev)
	add(old, l.prevAt, l.prevCounted)
	add(n-old, l.at, l.counted)
	l.prev = 0
	return out
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

// unblock wakes the requests waiting for the leases plans took (settled,
// failed or abandoned).
func (s *Store) unblock(plans []plan) {
	for _, p := range plans {
		if p.kind != leasing || p.ch == nil {
			continue
		}
		p.sh.mu.Lock()
		if p.l.pending == p.ch {
			p.l.pending = nil
		}
		p.sh.mu.Unlock()
		close(p.ch)
	}
}

// sweep drops the entries whose lease and denial have ended at t and
// returns the unused units of their leases, to give back: a lease that
// ended with units left still holds them (they go back when its key is
// next seen, or at Flush), and dropping it without them would strand
// them until their window ends; a flood of made-up keys at a full table
// would then strand the leftovers of every quiet key. An entry whose
// lease call is in flight is kept. sh.mu is held.
func (sh *shard) sweep(t int64) []giveBack {
	sh.sweeps++
	calm := int64(math.MaxInt64)
	var back []giveBack
	for k, l := range sh.m {
		if l.pending != nil {
			// A lease call is in flight for it and settles into it:
			// dropped, the units it counts would be neither admitted nor
			// given back. Its settling lowers calm to its new end.
			continue
		}
		end := max(l.until, l.denyUntil)
		if t >= end {
			back = append(back, l.takeBack(k.key, t)...)
			delete(sh.m, k)
			continue
		}
		calm = min(calm, end)
	}
	sh.calm = calm
	return back
}

// rollback undoes a locally planned hit of a denied request and writes
// its decision.
func (s *Store) rollback(h ratelimit.Hit, p plan, out []ratelimit.Decision, i int, t int64) {
	if p.sh == nil {
		return
	}
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	switch p.kind {
	case local:
		if p.l.gen == p.gen {
			p.l.units += h.Cost
			p.l.used -= h.Cost
		}
		// Else the key took its next lease meanwhile: the units were
		// counted with the earlier one (for a fixed window, perhaps in a
		// window that has ended), and admitting them from the next would
		// admit them past its window's limit. They stay unused, as the
		// units of a lease that ended with its window.
		out[i] = p.l.report(h, t, false)
	case denied:
		s.stats.localDenied.Add(1)
		out[i] = p.l.denial(t)
	}
}

// report is the decision of a hit admitted from l (counted) or of a
// locally admissible hit of a denied request (not counted).
func (l *lease) report(h ratelimit.Hit, t int64, counted bool) ratelimit.Decision {
	el := time.Duration(t-l.at) * ratelimit.Tick
	return ratelimit.Decision{Allowed: true, Counted: counted, Limit: l.capacity,
		Remaining: min(l.capacity, l.remaining+l.units), Reset: max(0, l.reset-el)}
}

// denial is the cached denial as seen at t.
func (l *lease) denial(t int64) ratelimit.Decision {
	d := l.deny
	el := time.Duration(t-l.deniedAt) * ratelimit.Tick
	d.RetryAfter = max(ratelimit.Tick, d.RetryAfter-el)
	d.Reset = min(max(0, d.Reset-el), d.RetryAfter)
	return d
}

// decideStore sends the exact hits and the leases to the wrapped store in
// one call (the units of ended leases going back alongside it), retrying once with leases of just the hits' costs when a
// larger lease was denied, and settles the plans.
func (s *Store) decideStore(ctx context.Context, now time.Time, t int64, hits []ratelimit.Hit, out []ratelimit.Decision, plans []plan) (bool, error) {
	defer s.giveBackAlongside(ctx, now, plans)()
	var sub []ratelimit.Hit
	var idx []int
	for i, h := range hits {
		switch plans[i].kind {
		case exact:
			sub = append(sub, h)
			idx = append(idx, i)
		case leasing:
			h.Cost = plans[i].size
			sub = append(sub, h)
			idx = append(idx, i)
		case denied:
			// Ask the store again at the hit's own cost, within the
			// request's single call: the request needs the store anyway.
			plans[i].kind, plans[i].size = leasing, h.Cost
			sub = append(sub, h)
			idx = append(idx, i)
		}
	}
	subOut := make([]ratelimit.Decision, len(sub))
	allowed, err := s.call(ctx, now, sub, subOut, plans, idx)
	if err == nil && !allowed {
		// A fixed window's units left, fewer than the lease, come back
		// only when the window ends: take what is left. A sliding
		// counter's come back continuously: the denial of the whole lease
		// stands (for at most the interval), so that at its limit the
		// key is leased k units at a time, not one call per unit.
		retry := false
		for j, i := range idx {
			p, d := &plans[i], subOut[j]
			if p.kind == leasing && p.size > hits[i].Cost && !d.Allowed && !d.Never &&
				hits[i].Limit.Algorithm == ratelimit.FixedWindow && d.Remaining >= hits[i].Cost {
				p.size = min(p.size, d.Remaining)
				sub[j].Cost, retry = p.size, true
			}
		}
		if retry {
			allowed, err = s.call(ctx, now, sub, subOut, plans, idx)
		}
	}
	for i, h := range hits {
		p := plans[i]
		if p.kind != local {
			continue
		}
		if err != nil || !allowed {
			s.rollback(h, p, out, i, t)
			continue
		}
		p.sh.mu.Lock()
		out[i] = p.l.report(h, t, true)
		p.sh.mu.Unlock()
		s.stats.local.Add(1)
	}
	if err != nil {
		return false, err
	}
	for j, i := range idx {
		d := subOut[j]
		if plans[i].kind == leasing {
			d = s.settle(hits[i], plans[i], d, allowed, t)
		}
		out[i] = d
	}
	return allowed, nil
}

func (s *Store) call(ctx context.Context, now time.Time, sub []ratelimit.Hit, subOut []ratelimit.Decision, plans []plan, idx []int) (bool, error) {
	s.stats.calls.Add(1)
	for _, i := range idx {
		if plans[i].kind == leasing {
			s.stats.leases.Add(1)
		}
	}
	return s.next.Decide(ctx, now, sub, subOut)
}

// settle records what the store decided on a lease hit sent at t and
// returns the hit's decision.
func (s *Store) settle(h ratelimit.Hit, p plan, d ratelimit.Decision, allowed bool, t int64) ratelimit.Decision {
	k := leaseKey{h.Limit.ID, h.Key}
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.m[k]
	if l != p.l {
		// Reset or reloaded meanwhile: keep nothing.
		return d
	}
	// Its end may move earlier: the shard's calm stays a lower bound.
	defer func() { sh.calm = min(sh.calm, max(l.until, l.denyUntil)) }()
	if !allowed {
		if !d.Allowed && !d.Never && d.RetryAfter > 0 {
			// Denied at the lease's size: until the size fits (or the
			// interval ends), this gateway denies the key by itself.
			l.denyUntil = t + int64(min(d.RetryAfter, h.Limit.Batch.Interval)/ratelimit.Tick)
			l.deny, l.deniedAt = d, t
			if h.Limit.Algorithm == ratelimit.FixedWindow {
				// Its units return with the next window: start that one
				// at the request's cost.
				l.size = h.Cost
			}
		}
		return d
	}
	extra := p.size - h.Cost
	hold := h.Limit.Batch.Interval
	if h.Limit.Algorithm == ratelimit.FixedWindow {
		// The units belong to the window they were counted in: the lease
		// ends with it. d.Reset is measured from the store's instant of
		// the count, which is not before t (the call was sent at t), so
		// t+Reset is not after the window's end.
		hold = min(hold, d.Reset)
	}
	until := t + int64(hold/ratelimit.Tick)
	if t >= l.until || l.units == 0 {
		l.units, l.until, l.prev = 0, until, 0
	} else {
		// Another lease still holds units: the units of both end with
		// the earlier.
		l.until = min(l.until, until)
		// The units held now were counted at prevAt or later (older
		// leases): giving them back at the oldest instant takes from no
		// bucket more of this gateway's units than it counted there, or
		// takes them from an older bucket, which weighs no more than the
		// one that counted them and leaves the window first.
		if l.prev == 0 {
			l.prevAt, l.prevCounted = l.at, l.counted
		}
		l.prev = l.units
	}
	l.units += extra
	l.gen++
	l.size, l.used = p.size, h.Cost
	l.remaining, l.capacity, l.reset, l.at = d.Remaining, d.Limit, d.Reset, t
	l.counted = t
	if d.At != 0 {
		// The store counted on its own clock (Redis TIME): its units
		// are in the window of that instant, whatever this clock says.
		l.counted = d.At
	}
	l.denyUntil = 0
	d.Remaining = min(d.Limit, d.Remaining+l.units)
	return d
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

// waitLease waits until ch, another request's lease call, is settled. A
// caller without a deadline of its own is held at most the next store's
// budget (the lease call it waits for is bounded by it): the timer is
// made only when a request waits, which only a lease call in flight on
// the same key makes it do.
func (s *Store) waitLease(ctx context.Context, ch <-chan struct{}) error {
	var expired <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		if d := s.CallTimeout(); d > 0 {
			tm := time.NewTimer(d)
			defer tm.Stop()
			expired = tm.C
		}
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	}
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
