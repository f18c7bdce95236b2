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

// waiters counts the requests waiting on each delay limit in this
// gateway, by limit ID, so the bound holds across reloads that keep a
// limit's counters. The map only grows by limit IDs the configurations
// named.
type waiters struct{ m sync.Map } // limit ID → *atomic.Int64

func (w *waiters) counter(id string) *atomic.Int64 {
	if c, ok := w.m.Load(id); ok {
		return c.(*atomic.Int64)
	}
	c, _ := w.m.LoadOrStore(id, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// Waiting returns the requests waiting for their slots on the limit with
// this ID in this gateway.
func (h *Handler) Waiting(limitID string) int64 { return h.waiting.counter(limitID).Load() }

// noWaitIfFull marks the hit just appended for l as one that must not
// reserve a slot when l delays and its waiting room in this gateway is
// full: reserving first and giving the slot back after would waste it
// whenever another request reserved behind it in between, so a flood past
// max_waiting would push every later slot out. (Requests deciding at the
// same moment can still find the room full only after reserving; those
// give their slots back.)
func (h *Handler) noWaitIfFull(q *request, l *policy.Limit) {
	if l.Limit.MaxDelay > 0 && h.waiting.counter(l.ID).Load() >= int64(l.MaxWaiting) {
		q.hits[len(q.hits)-1].Mode = ratelimit.HitNoWait
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
// instead: too many requests already wait on one of the limits
// (max_waiting; 429 after giving the reservations back), or the client
// went away (its reservations are given back, 499 in the logs).
func (h *Handler) wait(w http.ResponseWriter, r *http.Request, p *policy.Policy, rt *policy.Route, q *request, d time.Duration) bool {
	ev := &q.ev
	var held [4]*atomic.Int64
	counters := held[:0]
	defer func() {
		for _, c := range counters {
			c.Add(-1)
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
		c := h.waiting.counter(l.ID)
		counters = append(counters, c)
		if c.Add(1) > int64(l.MaxWaiting) {
			h.cancelReservations(q, p)
			ev.Outcome = OutcomeLimited
			secs := int64((d + time.Second - 1) / time.Second)
			w.Header()["Retry-After"] = headers.IntValue(secs)
			headers.WriteProblem(w, headers.Problem{
				Status:     http.StatusTooManyRequests,
				Title:      "Too Many Requests",
				Detail:     "too many requests waiting on limit " + strconv.Quote(l.Name) + "; retry in " + strconv.FormatInt(secs, 10) + "s",
				RetryAfter: secs,
			})
			return false
		}
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
