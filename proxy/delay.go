package proxy

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// rooms holds the waiting room of each delay limit in this gateway, by
// limit ID, so the bound holds across reloads that keep a limit's
// counters. The map only grows by limit IDs the configurations named.
type rooms struct{ m sync.Map } // limit ID → *room

func (w *rooms) room(id string) *room {
	if r, ok := w.m.Load(id); ok {
		return r.(*room)
	}
	r, _ := w.m.LoadOrStore(id, new(room))
	return r.(*room)
}

// shrinkAbove is the number of keys past which a room's emptied key map
// is dropped rather than kept for reuse: Go maps never give back the
// buckets a flood of distinct keys made them grow.
const shrinkAbove = 64

// room counts the requests waiting on one delay limit: in all (at most
// the limit's MaxWaiting) and by counter key (at most its WaitShare
// each), so that a few keys cannot fill the room for every other client.
// A key is in byKey only while it has waiters, so byKey holds at most
// MaxWaiting entries whatever the number of keys clients send.
type room struct {
	// total is changed under mu and read without it: the look every
	// request of the limit takes (full) and Waiting.
	total atomic.Int64
	mu    sync.Mutex
	byKey map[string]int32
	// peak is the most keys byKey has held since it was made.
	peak int
}

// full reports whether a request with this counter key would find no
// place: the room holds maxWaiting, or the key holds its share. Only
// when at least share requests wait could any key hold its share, so
// the common case (few or no waiters) reads one atomic and takes no lock.
func (r *room) full(key string, maxWaiting, share int) bool {
	n := r.total.Load()
	if n >= int64(maxWaiting) {
		return true
	}
	if share >= maxWaiting || n < int64(share) {
		return false
	}
	r.mu.Lock()
	k := r.byKey[key]
	r.mu.Unlock()
	return int(k) >= share
}

// enter takes a place for a request with this counter key, or reports
// false when it would pass maxWaiting or the key's share. keyed says
// whether the place was counted by key: leave needs the same answer
// even if a reload changed the limit's share in between.
func (r *room) enter(key string, maxWaiting, share int) (ok, keyed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total.Load() >= int64(maxWaiting) {
		return false, false
	}
	keyed = share < maxWaiting
	if keyed {
		k := r.byKey[key]
		if int(k) >= share {
			return false, false
		}
		if r.byKey == nil {
			r.byKey = make(map[string]int32)
		}
		r.byKey[key] = k + 1
		r.peak = max(r.peak, len(r.byKey))
	}
	r.total.Add(1)
	return true, keyed
}

// leave gives back a place enter took.
func (r *room) leave(key string, keyed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if keyed {
		if k := r.byKey[key] - 1; k > 0 {
			r.byKey[key] = k
		} else {
			delete(r.byKey, key)
			if len(r.byKey) == 0 && r.peak > shrinkAbove {
				r.byKey, r.peak = nil, 0
			}
		}
	}
	r.total.Add(-1)
}

// waitShare is l's WaitShare, or all of its room for a limit built
// without one.
func waitShare(l *policy.Limit) int {
	if l.WaitShare > 0 {
		return l.WaitShare
	}
	return l.MaxWaiting
}

// Waiting returns the requests waiting for their slots on the limit with
// this ID in this gateway.
func (h *Handler) Waiting(limitID string) int64 { return h.waiting.room(limitID).total.Load() }

// noWaitIfFull marks the hit just appended for l as one that must not
// reserve a slot when l delays and its waiting room in this gateway is
// full, or holds the hit's key's share: reserving first and giving the
// slot back after would waste it whenever another request reserved
// behind it in between, so a flood past max_waiting would push every
// later slot out. (Requests deciding at the same moment can still find
// the room full only after reserving; those give their slots back.)
func (h *Handler) noWaitIfFull(q *request, l *policy.Limit) {
	if l.Limit.MaxDelay <= 0 {
		return
	}
	hit := &q.hits[len(q.hits)-1]
	if h.waiting.room(l.ID).full(hit.Key, l.MaxWaiting, waitShare(l)) {
		hit.Mode = ratelimit.HitNoWait
	}
}

// delayOf returns the longest Delay among q's decisions: how long the
// request must wait before it is forwarded (0: at once).
func delayOf(q *request) time.Duration {
	var d time.Duration
	for i := range q.hits {
		d = max(d, q.ds[i].Delay)
	}
	return d
}

// wait holds an admitted request until the slots it reserved come (the
// longest Delay of its hits: each slot is reserved at its own instant,
// and the request goes when the last one has come). It waits in the
// request's own goroutine on a timer and the request's context: no
// goroutine per waiting request. It returns false when it has answered
// instead: too many requests already wait on one of the limits, or too
// many of the same key (max_waiting and its share per key; 429 after
// giving the reservations back), or the client
// went away (its reservations are given back, 499 in the logs).
func (h *Handler) wait(w http.ResponseWriter, r *http.Request, p *policy.Policy, rt *policy.Route, q *request, d time.Duration) bool {
	ev := &q.ev
	type place struct {
		r     *room
		key   string
		keyed bool
	}
	var held [4]place
	places := held[:0]
	defer func() {
		for _, pl := range places {
			pl.r.leave(pl.key, pl.keyed)
		}
	}()
	for i := range q.hits {
		if q.ds[i].Delay <= 0 {
			continue
		}
		l := policyLimit(rt, q.hits[i].Limit)
		if l == nil {
			continue
		}
		rm, key := h.waiting.room(l.ID), q.hits[i].Key
		ok, keyed := rm.enter(key, l.MaxWaiting, waitShare(l))
		if !ok {
			h.cancelReservations(q, p)
			ev.Outcome = OutcomeLimited
			secs := int64((d + time.Second - 1) / time.Second)
			w.Header()["Retry-After"] = h.answers.IntValue(secs)
			headers.WriteProblem(w, headers.Problem{
				Status:     http.StatusTooManyRequests,
				Title:      "Too Many Requests",
				Detail:     "too many requests waiting on limit " + strconv.Quote(l.Name) + "; retry in " + strconv.FormatInt(secs, 10) + "s",
				RetryAfter: secs,
			})
			return false
		}
		places = append(places, place{rm, key, keyed})
	}
	done := r.Context().Done()
	if q.resp.clientDone != nil {
		done = q.resp.clientDone // the context was detached for counting by response
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		ev.Delay = d
		return true
	case <-done:
		h.cancelReservations(q, p)
		ev.Outcome = OutcomeCanceled
		w.WriteHeader(499)
		return false
	}
}

// cancelReservations gives back the slots q's delayed hits reserved, on
// the store that reserved them, in one call bounded by store.timeout (the
// request's context may be done). A failure is logged, never retried: the
// call may have landed, and a refund twice would give back another
// request's slot.
func (h *Handler) cancelReservations(q *request, p *policy.Policy) {
	c, ok := q.decider.(ratelimit.Canceler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Store.Timeout)
	defer cancel()
	now := h.now()
	if err := c.Cancel(ctx, now, q.hits, q.ds); err != nil {
		h.logStoreError(err, p.Store.OnError, now)
		return // it may not have landed: the decisions stand
	}
	if h.observer != nil {
		// The reserved slots no longer count: observers that report
		// usage (the usage export) must not bill them.
		q.fillCounted()
		for i := range q.hits {
			if i < len(q.ds) && q.ds[i].Counted && q.ds[i].Delay > 0 {
				q.ev.Counted[i] = 0
			}
		}
	}
}

// policyLimit returns the limit of rt whose definition is l, or a
// per-request variant of (plan rates, an override: same name).
func policyLimit(rt *policy.Route, l *ratelimit.Limit) *policy.Limit {
	for _, pl := range rt.Limits {
		if pl.Limit == l || pl.Name == l.Name {
			return pl
		}
	}
	return nil
}
