package hybrid

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

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
