package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/tollgate/gateway/costscan"
	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// usageState is the per-request state of the token budgets
// (policy.Usage): the estimates reserved, the usage read from the
// answer, and the units each hit finally counted. Slices indexed by k
// follow respCount.lims.
type usageState struct {
	// body is the request body read for the estimates (read once);
	// bodyRead says it was.
	body     []byte
	bodyRead bool
	// reqCost[k] is the request's own cost (cost, cost_header) for
	// on_missing_usage = "cost".
	reqCost []int64
	// hdr[k], hdrOK[k]: the usage in the response cost header.
	hdr   []int64
	hdrOK []bool
	// scans[k] reads the answer's body when scanOn[k].
	scans  []costscan.Scanner
	scanOn []bool
	// sb wraps the answer's body while the scanners read it.
	sb scanBody
	// counted is Event.Counted; takes, tds, gives and ats the settling
	// calls' scratch space.
	counted []int64
	takes   []ratelimit.Hit
	tds     []ratelimit.Decision
	gives   []ratelimit.Hit
	ats     []time.Time
}

func (u *usageState) reset() {
	u.body, u.bodyRead = nil, false
	u.reqCost, u.hdr, u.hdrOK, u.scanOn = u.reqCost[:0], u.hdr[:0], u.hdrOK[:0], u.scanOn[:0]
	u.sb = scanBody{}
	u.counted = u.counted[:0]
	clear(u.takes)
	clear(u.gives)
	u.takes, u.tds, u.gives, u.ats = u.takes[:0], u.tds[:0], u.gives[:0], u.ats[:0]
}

// grow sizes the per-limit slices for n response limits.
func (u *usageState) grow(n int) {
	for len(u.hdr) < n {
		u.hdr, u.hdrOK, u.scanOn = append(u.hdr, 0), append(u.hdrOK, false), append(u.scanOn, false)
	}
	for len(u.scans) < n {
		u.scans = append(u.scans, costscan.Scanner{})
	}
}

// usageCap is the most units one answer counts under lim: its largest
// capacity (a usage can exhaust a window, not lock a client out for many
// windows).
func usageCap(lim *ratelimit.Limit) int64 {
	var most int64
	for i := range lim.Windows() {
		most = max(most, lim.Capacity(i))
	}
	return most
}

// estimate returns the units a reserving limit l (its variant lim)
// reserves for q: the value at its cost_request_json path in the
// request's JSON body, capped at lim's capacity, or cost when the body is
// empty or lacks the path. ok is false when it answered the request
// instead (400: not JSON or a bad value; 413: too large; 408: too slow;
// 499: the client left).
func (h *Handler) estimate(q *request, l *policy.Limit, lim *ratelimit.Limit, cost int64) (int64, bool) {
	us := l.Response.Usage
	u := &q.resp.usage
	if !u.bodyRead && !h.readEstimateBody(q, us.EstimateBytes) {
		return 0, false
	}
	if int64(len(u.body)) > us.EstimateBytes {
		h.estimateTooLarge(q, us.EstimateBytes)
		return 0, false
	}
	if len(u.body) == 0 {
		return cost, true
	}
	r, v, isJSON := costscan.Find(&us.Estimate, u.body)
	switch {
	case !isJSON:
		h.badEstimate(q, "the request body is not JSON; limit "+strconv.Quote(l.Name)+" reads its cost from "+strconv.Quote(us.Estimate.String()))
		return 0, false
	case r == costscan.None:
		return cost, true
	case r == costscan.Invalid || v < 1:
		h.badEstimate(q, "limit "+strconv.Quote(l.Name)+": "+strconv.Quote(us.Estimate.String())+" must be an integer in 1..2^53")
		return 0, false
	}
	return min(v, usageCap(lim)), true
}

func (h *Handler) badEstimate(q *request, detail string) {
	q.ev.Outcome = OutcomeBadRequest
	headers.WriteProblem(&q.w, headers.Problem{Status: http.StatusBadRequest, Title: "Bad Request", Detail: detail})
}

func (h *Handler) estimateTooLarge(q *request, limit int64) {
	q.ev.Outcome = OutcomeBadRequest
	closeAfter(&q.w, q.r)
	headers.WriteProblem(&q.w, headers.Problem{
		Status: http.StatusRequestEntityTooLarge,
		Title:  "Content Too Large",
		Detail: "the request body is larger than the " + strconv.FormatInt(limit, 10) + " bytes read for its cost",
	})
	_ = http.NewResponseController(q.w.ResponseWriter).SetReadDeadline(time.Now())
}

// readEstimateBody reads q's body, up to limit bytes (and the route's
// max_body_bytes) and within the route's timeout, and puts it back
// intact for the upstream. It reports false when it answered instead.
func (h *Handler) readEstimateBody(q *request, limit int64) bool {
	r, u, rt := q.r, &q.resp.usage, q.rt
	u.bodyRead = true
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	routeMax := rt.MaxBodyBytes > 0 && rt.MaxBodyBytes < limit
	if routeMax {
		limit = rt.MaxBodyBytes
	}
	if r.ContentLength > limit {
		if routeMax {
			q.ev.Outcome = OutcomeBadRequest
			tooLarge(&q.w, r, limit)
		} else {
			h.estimateTooLarge(q, limit)
		}
		return false
	}
	rc := http.NewResponseController(q.w.ResponseWriter)
	if rt.Timeout > 0 {
		// A body that trickles, or never ends, is cut off as one still
		// arriving when the route's timeout runs out would be.
		_ = rc.SetReadDeadline(q.start.Add(rt.Timeout))
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		// (Before the context: the failed read cancels it too.)
		q.ev.Outcome = OutcomeBadRequest
		closeAfter(&q.w, r)
		headers.WriteProblem(&q.w, headers.Problem{Status: http.StatusRequestTimeout, Title: "Request Timeout",
			Detail: "the request body did not arrive within the route's timeout"})
		return false
	case err != nil && r.Context().Err() != nil:
		q.ev.Outcome = OutcomeCanceled
		q.w.WriteHeader(499)
		return false
	case err != nil:
		q.ev.Outcome = OutcomeBadRequest
		headers.WriteProblem(&q.w, headers.Problem{Status: http.StatusBadRequest, Title: "Bad Request",
			Detail: "the request body could not be read"})
		return false
	case int64(len(buf)) > limit:
		if routeMax {
			q.ev.Outcome = OutcomeBadRequest
			tooLarge(&q.w, r, limit)
		} else {
			h.estimateTooLarge(q, limit)
		}
		return false
	}
	u.body = buf
	r.Body = heldBody{Reader: bytes.NewReader(buf), Closer: r.Body}
	return true
}

// heldBody is a request body read ahead, forwarded from memory; Close
// closes the client's.
type heldBody struct {
	io.Reader
	io.Closer
}

// scanBody is an answer's body read by the usage scanners as it passes
// to the client: each Read hands its bytes on unchanged and at once.
type scanBody struct {
	io.ReadCloser
	u *usageState
}

func (b *scanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		for k, on := range b.u.scanOn {
			if on {
				b.u.scans[k].Write(p[:n])
			}
		}
	}
	return n, err
}

// isEventStream reports whether h's Content-Type is text/event-stream.
func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// encoded reports whether the answer's body is content-coded (gzip, …):
// the scanners do not decode it, so it has no usage.
func encoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		if v != "" && v != "identity" {
			return true
		}
	}
	return false
}

// readsAnswerBody reports whether a limit of rt reads its usage from
// the answer's body (cost_response_json).
func readsAnswerBody(rt *policy.Route) bool {
	for _, l := range rt.Limits {
		if l.Response != nil && l.Response.Usage != nil && !l.Response.Usage.Body.IsZero() {
			return true
		}
	}
	return false
}

// recordUsage runs in ModifyResponse, before the response cost headers
// are removed: it reads each token budget's usage header, and sets the
// scanners on the body for those that read it there.
func (h *Handler) recordUsage(q *request, resp *http.Response) {
	c := &q.resp
	u := &c.usage
	u.grow(len(c.lims))
	var sse, coded, checked bool
	for k, l := range c.lims {
		us := l.Response.Usage
		u.scanOn[k] = false
		if us == nil {
			continue
		}
		if l.Response.CostHeader != "" {
			u.hdr[k], u.hdrOK[k] = l.ResponseHeaderCost(resp.Header)
			continue
		}
		if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
			// (A 101's body is the tunnel, which ReverseProxy needs
			// unwrapped: it has no usage.)
			continue
		}
		if !checked {
			sse, coded, checked = isEventStream(resp.Header), encoded(resp.Header), true
		}
		if coded {
			continue
		}
		u.scans[k].Reset(&us.Body, sse, us.ScanBytes)
		u.scanOn[k] = true
		if u.sb.u == nil {
			u.sb = scanBody{ReadCloser: resp.Body, u: u}
			resp.Body = &u.sb
		}
	}
}

// usageOf returns the units the answer counts under the k-th response
// limit l (hit counted on lim): zero when its status does not count (or
// no answer came), else the usage it reported, else what
// on_missing_usage says.
func (q *request) usageOf(k int, l *policy.Limit, lim *ratelimit.Limit) int64 {
	c := &q.resp
	u := &c.usage
	if c.status == 0 || !l.Response.Counts(c.status) {
		return 0
	}
	if l.Response.CostHeader != "" {
		if k < len(u.hdrOK) && u.hdrOK[k] {
			return u.hdr[k]
		}
	} else if k < len(u.scanOn) && u.scanOn[k] {
		if r, v := u.scans[k].Result(); r == costscan.Valid {
			return min(v, usageCap(lim))
		}
	}
	switch l.Response.Usage.OnMissing {
	case policy.MissingZero:
		return 0
	case policy.MissingCost:
		return u.reqCost[k]
	}
	return q.hits[c.idx[k]].Cost
}

// settleUsage counts the token budgets' answers: a reserving limit's
// usage above its estimate is charged (a take, even past the limit), the
// rest given back (Settler); a limit that peeked takes its usage. One
// store call each, on the store that decided, bounded by store.timeout and
// independent of the client. It fills Event.Counted for every hit.
func (h *Handler) settleUsage(q *request, p *policy.Policy) {
	c := &q.resp
	u := &c.usage
	if q.decider == nil || len(q.hits) == 0 {
		return
	}
	u.counted = u.counted[:0]
	for i, hit := range q.hits {
		var n int64
		if i < len(q.ds) && q.ds[i].Counted && hit.Mode != ratelimit.HitPeek {
			n = hit.Cost
		}
		u.counted = append(u.counted, n)
	}
	u.takes, u.gives, u.ats = u.takes[:0], u.gives[:0], u.ats[:0]
	for k, l := range c.lims {
		i := c.idx[k]
		hit := q.hits[i]
		if l.Response.Usage == nil {
			// count = "response" by header or the request's cost
			// (countResponse takes it).
			if c.status != 0 && l.Response.Counts(c.status) && k < len(c.costs) {
				u.counted[i] = c.costs[k]
			}
			continue
		}
		units := q.usageOf(k, l, hit.Limit)
		if !l.Response.Usage.Reserves() {
			if units > 0 {
				hit.Mode, hit.Cost = ratelimit.HitTake, units
				u.takes = append(u.takes, hit)
			}
			u.counted[i] = units
			continue
		}
		if !q.ds[i].Counted {
			continue // nothing was reserved (a shadow limit that denied)
		}
		switch est := hit.Cost; {
		case units > est:
			hit.Mode, hit.Cost = ratelimit.HitTake, units-est
			u.takes = append(u.takes, hit)
		case units < est:
			hit.Cost = est - units
			at := q.start
			if d := q.ds[i].At; d != 0 {
				at = time.UnixMicro(d)
			}
			u.gives, u.ats = append(u.gives, hit), append(u.ats, at)
		}
		u.counted[i] = units
	}
	q.ev.Counted = u.counted
	if len(u.takes) == 0 && len(u.gives) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Store.Timeout)
	defer cancel()
	now := h.now()
	if len(u.takes) > 0 {
		u.tds = grow(u.tds, len(u.takes))
		if _, err := q.decider.Decide(ctx, now, u.takes, u.tds); err != nil {
			h.logStoreError(err, p.Store.OnError, now)
		}
		// A peeked budget's units belong to the period they were
		// taken in (Event.CountedAt), by the store's clock when it has one.
		q.ev.CountedAt = now
		if u.tds[0].At != 0 {
			q.ev.CountedAt = time.UnixMicro(u.tds[0].At)
		}
	}
	if len(u.gives) > 0 {
		g, ok := q.decider.(ratelimit.Settler)
		if !ok {
			return // the units stay counted: the budget errs low
		}
		if err := g.GiveBack(ctx, now, u.gives, u.ats); err != nil {
			h.logStoreError(err, p.Store.OnError, now)
		}
	}
}
