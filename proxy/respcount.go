package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// respCount is the per-request state of the limits that count by response
// (count = "response"): their hits are peeks before forwarding, and the
// upstream's answer decides what they take afterwards.
type respCount struct {
	// idx are the indexes in request.hits of the response-counted hits,
	// lims their limits (same order).
	idx  []int
	lims []*policy.Limit
	// status is the upstream's status (0: no response came), costs the
	// units each hit takes, read when the response arrived.
	status int
	costs  []int64
	// takes and tds are the scratch space of the counting call.
	takes []ratelimit.Hit
	tds   []ratelimit.Decision
	// counted is the scratch space of Event.Counted: per hit, the units
	// it finally counted.
	counted []int64
	// clientDone is the client's own context's Done, kept when the
	// request's context was detached from it (a wait for a delay slot
	// still ends when the client goes).
	clientDone <-chan struct{}
	// usage is the state of the token budgets among them (usage.go).
	usage usageState
}

func (c *respCount) reset() {
	c.idx, c.lims, c.costs = c.idx[:0], c.lims[:0], c.costs[:0]
	clear(c.takes)
	c.takes, c.tds = c.takes[:0], c.tds[:0]
	c.counted = c.counted[:0]
	c.status = 0
	c.clientDone = nil
	c.usage.reset()
}

// respKey carries the request's scratch space to ModifyResponse.
type respKey struct{}

// peekResponse marks the hit just appended for l as a peek when l counts
// by response: it is checked before the request is forwarded but counts
// nothing until the upstream answers. A token budget that reserves its
// estimate stays a count (the reservation), settled after the answer;
// reqCost is the request's own cost (cost, cost_header).
func (q *request) peekResponse(l *policy.Limit, reqCost int64) {
	if l.Response == nil {
		return
	}
	i := len(q.hits) - 1
	q.resp.usage.reqCost = append(q.resp.usage.reqCost, reqCost)
	if !l.Response.Usage.Reserves() {
		q.hits[i].Mode = ratelimit.HitPeek
	}
	q.resp.idx = append(q.resp.idx, i)
	q.resp.lims = append(q.resp.lims, l)
}

// detachForResponse returns r with a context that the client going away
// does not cancel (bounded by the route's timeout as before), carrying q
// for ModifyResponse: a client that sends a login attempt and hangs up
// before the answer must not keep the attempt from being counted.
func detachForResponse(r *http.Request, q *request) *http.Request {
	q.resp.clientDone = r.Context().Done()
	ctx := context.WithValue(context.WithoutCancel(r.Context()), respKey{}, q)
	return r.WithContext(ctx)
}

// recordResponse is the routes' ModifyResponse when they have limits that
// count by response: it notes the upstream's status and each limit's cost
// from its response cost header, and removes those headers from the
// response (they are for the gateway, not the client).
func (h *Handler) recordResponse(resp *http.Response) error {
	q, _ := resp.Request.Context().Value(respKey{}).(*request)
	if q == nil {
		return nil
	}
	c := &q.resp
	c.status = resp.StatusCode
	c.costs = c.costs[:0]
	for k, l := range c.lims {
		cost, ok := l.ResponseCost(resp.Header, q.hits[c.idx[k]].Cost)
		if !ok {
			h.log.Debug("malformed response cost header ignored", "limit", l.Name, "header", l.Response.CostHeader)
		}
		c.costs = append(c.costs, cost)
	}
	h.recordUsage(q, resp)
	for _, l := range c.lims {
		if l.Response.CostHeader != "" {
			resp.Header.Del(l.Response.CostHeader)
		}
	}
	return nil
}

// countResponse counts the response of a request admitted with peeks:
// one store call taking each matching limit's units, on the store that
// peeked, bounded by store.timeout and independent of the client (which
// may have gone). A failed call is logged, never retried: it may have
// counted.
func (h *Handler) countResponse(q *request, p *policy.Policy) {
	c := &q.resp
	h.settleUsage(q, p) // the token budgets (usage.go)
	if c.status == 0 || q.decider == nil || len(q.hits) == 0 {
		return
	}
	c.takes = c.takes[:0]
	for k, l := range c.lims {
		if l.Response.Usage != nil || !l.Response.Counts(c.status) {
			continue
		}
		hit := q.hits[c.idx[k]]
		hit.Mode, hit.Cost = ratelimit.HitTake, c.costs[k]
		c.takes = append(c.takes, hit)
	}
	if len(c.takes) == 0 {
		return
	}
	c.tds = grow(c.tds, len(c.takes))
	ctx, cancel := context.WithTimeout(context.Background(), p.Store.Timeout)
	defer cancel()
	now := h.now()
	_, err := q.decider.Decide(ctx, now, c.takes, c.tds)
	if err != nil {
		h.logStoreError(err, p.Store.OnError, now)
	}
	h.reportCounted(q, err == nil, now)
}

// reportCounted tells the observers what each hit finally counted
// (Event.Counted) and when the response's units were counted
// (Event.CountedAt): the usage export bills by them, and a peek's
// decision counted nothing. ok is false when the counting call failed:
// its units are unknown (it may have counted) and reported as none. It
// corrects only the hits countResponse took; the token budgets' were
// set by settleUsage, which ran first.
func (h *Handler) reportCounted(q *request, ok bool, now time.Time) {
	if h.observer == nil {
		return
	}
	c := &q.resp
	if len(q.ev.Counted) != len(q.hits) {
		q.fillCounted()
	}
	j := 0
	for k, l := range c.lims {
		// The same selection as countResponse's takes, so j walks them.
		if l.Response.Usage != nil || !l.Response.Counts(c.status) {
			continue
		}
		var n int64
		if ok && c.tds[j].Counted {
			n = c.takes[j].Cost
		}
		q.ev.Counted[c.idx[k]] = n
		j++
	}
	q.ev.CountedAt = now
	if len(c.tds) > 0 && c.tds[0].At != 0 {
		q.ev.CountedAt = time.UnixMicro(c.tds[0].At) // the store's own clock
	}
}

// respondStatus records a respond route's status as the response to
// count.
func (q *request) respondStatus(status int) {
	if len(q.resp.lims) == 0 {
		return
	}
	q.resp.status = status
	q.resp.costs = q.resp.costs[:0]
	for _, k := range q.resp.idx {
		q.resp.costs = append(q.resp.costs, q.hits[k].Cost)
	}
}

// countsResponse reports whether any limit of rt counts by response.
func countsResponse(rt *policy.Route) bool {
	for _, l := range rt.Limits {
		if l.Response != nil {
			return true
		}
	}
	return false
}

// fillCounted sets Event.Counted to what each hit's decision counted
// (its cost when counted, nothing for a peek), for a caller to correct
// where the request later counted otherwise.
func (q *request) fillCounted() {
	c := &q.resp
	c.counted = c.counted[:0]
	for i := range q.hits {
		var n int64
		if q.hits[i].Mode != ratelimit.HitPeek && i < len(q.ds) && q.ds[i].Counted {
			n = q.hits[i].Cost
		}
		c.counted = append(c.counted, n)
	}
	q.ev.Counted = c.counted
}
