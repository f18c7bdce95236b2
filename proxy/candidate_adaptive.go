package proxy

import (
	"net/http"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/policy"
)

// candAdaptive holds a candidate's adaptive limiters: they see the live
// requests' concurrency and the upstream's latency as the live ones do,
// in shadow (they never hold a request back), and report what they would
// have shed.
type candAdaptive struct {
	c    *Candidate
	lims map[*policy.Route][]*adaptive.Limiter
}

// candHold is a request's place at one candidate adaptive limit: the slot
// it took (lim), or the limit's name when it would have been shed.
type candHold struct {
	lim  *adaptive.Limiter
	shed string
}

// candidateLimiters returns c's adaptive limiters, made on first use (a
// new candidate starts afresh).
func (h *Handler) candidateLimiters(c *Candidate) *candAdaptive {
	if a := h.cand.ad.Load(); a != nil && a.c == c {
		return a
	}
	a := &candAdaptive{c: c, lims: make(map[*policy.Route][]*adaptive.Limiter)}
	now := h.now()
	for _, rt := range c.Policy.Routes {
		for _, l := range rt.Adaptive {
			a.lims[rt] = append(a.lims[rt], adaptive.New(l.Adaptive.Config, now))
		}
	}
	if h.cand.ad.CompareAndSwap(h.cand.ad.Load(), a) {
		return a
	}
	return h.cand.ad.Load()
}

// acquireCandidate decides r by the candidate's adaptive limits when it
// arrives, as the live ones are: a slot when one is free, else the limit's
// name as a would-be shedding. Only when the candidate has adaptive limits
// on the request's route.
func (h *Handler) acquireCandidate(c *Candidate, r *http.Request, q *request) {
	p := c.Policy
	raw := r.URL.RawPath
	if raw == "" {
		raw = r.URL.EscapedPath()
	}
	rt, _, err := p.Match(r.Host, r.Method, raw)
	if err != nil || rt == nil || len(rt.Adaptive) == 0 {
		return
	}
	a := h.candidateLimiters(c)
	if a.c != c {
		return
	}
	id := p.Identity.Identify(r, h.identityClock(p))
	for i, l := range rt.Adaptive {
		lim := a.lims[rt][i]
		pr := l.Adaptive.Priority(rt, &id, r.Header, r.RemoteAddr)
		if lim.TryAcquire(pr) == adaptive.Admit {
			q.candAd = append(q.candAd, candHold{lim: lim})
			q.ad.now = h.now // the sample is the time to the response header
			continue
		}
		lim.CountShed(pr)
		q.candAd = append(q.candAd, candHold{shed: l.Name})
	}
}

// settleCandidate gives back the candidate's slots with the live
// exchange's sample and adds the limits that would have shed the request
// to its candidate denials.
func (h *Handler) settleCandidate(q *request, out *CandidateOutcome) {
	if len(q.candAd) == 0 {
		return
	}
	o, lat := h.sample(q)
	now := h.now()
	for _, c := range q.candAd {
		if c.lim != nil {
			c.lim.Release(now, lat, o)
		} else {
			out.CandidateDenied = append(out.CandidateDenied, c.shed)
		}
	}
	clear(q.candAd)
	q.candAd = q.candAd[:0]
}
