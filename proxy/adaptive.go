package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/gateway/adaptive"
	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/policy"
)

// adaptiveLimiters holds the limiters of the adaptive_concurrency limits
// in this gateway, by what they learn about (the limit's ID and numbers,
// and the route for a limit keyed by route), so that a reload keeping a
// limit keeps what it has learned, as the upstream registry keeps pools.
// The map holds only what the current policy names.
type adaptiveLimiters struct {
	mu sync.Mutex
	m  map[string]*adaptive.Limiter
}

// adaptiveKey names what a limiter learns about: a change of the limit's
// numbers starts it afresh.
func adaptiveKey(l *policy.Limit, route string) string {
	a := l.Adaptive
	k := l.ID + "|" + strconv.FormatInt(a.Config.MinLimit, 10) + "|" + strconv.FormatInt(a.Config.MaxLimit, 10) +
		"|" + strconv.FormatFloat(a.Config.Reserve, 'g', -1, 64)
	if a.PerRoute {
		k += "|" + route
	}
	return k
}

// update returns each route's limiters (in the order of its Adaptive
// limits), keeping those p still names and dropping the others.
func (a *adaptiveLimiters) update(p *policy.Policy, now time.Time) map[*policy.Route][]*adaptive.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := make(map[string]*adaptive.Limiter)
	out := make(map[*policy.Route][]*adaptive.Limiter)
	for _, rt := range p.Routes {
		for _, l := range rt.Adaptive {
			k := adaptiveKey(l, rt.Name)
			lim := next[k]
			if lim == nil {
				if lim = a.m[k]; lim == nil {
					lim = adaptive.New(l.Adaptive.Config, now)
				}
				next[k] = lim
			}
			out[rt] = append(out[rt], lim)
		}
	}
	a.m = next
	return out
}

// AdaptiveStat is one adaptive limiter's state, for reports.
type AdaptiveStat struct {
	// Name is the limit's name; Route the route it learns for when the
	// limit is keyed by route ("" otherwise).
	Name, Route string
	// Shadow is set for a limit in shadow mode (it sheds nothing).
	Shadow bool
	adaptive.Stats
}

// AdaptiveStats returns the state of every adaptive limiter of the
// current policy, by limit then route.
func (h *Handler) AdaptiveStats() []AdaptiveStat {
	s := h.snap.Load()
	var out []AdaptiveStat
	seen := make(map[*adaptive.Limiter]bool)
	for _, rt := range s.p.Routes {
		for i, l := range rt.Adaptive {
			lim := s.adaptive[rt][i]
			if seen[lim] {
				continue
			}
			seen[lim] = true
			st := AdaptiveStat{Name: l.Name, Shadow: l.Shadow, Stats: lim.Stats()}
			if l.Adaptive.PerRoute {
				st.Route = rt.Name
			}
			out = append(out, st)
		}
	}
	slices.SortStableFunc(out, func(a, b AdaptiveStat) int {
		if a.Name != b.Name {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}
		if a.Route < b.Route {
			return -1
		}
		if a.Route > b.Route {
			return 1
		}
		return 0
	})
	return out
}

// adaptiveReq is a request's hold on adaptive limiters.
type adaptiveReq struct {
	held []*adaptive.Limiter
	// now is the handler's clock, for headerAt.
	now func() time.Time
	// headerAt is when the upstream's final response header was written:
	// the end of the upstream's own time, which a client reading the body
	// slowly does not lengthen.
	headerAt time.Time
}

func (a *adaptiveReq) reset() {
	clear(a.held)
	a.held = a.held[:0]
	a.now, a.headerAt = nil, time.Time{}
}

// header records when the final response header was written, when an
// adaptive limiter (live or candidate) is to learn from it (now is set).
func (a *adaptiveReq) header() {
	if a.now != nil && a.headerAt.IsZero() {
		a.headerAt = a.now()
	}
}

// serveAdaptive runs a request on a route with adaptive limits: each must
// admit it (at once, after waiting up to its max_delay, or once a probe of
// the base latency is over), else it is shed (503) before any other limit
// counts it; then the store decides the route's other limits and the
// request proceeds. Its slots are given back when it ends, with the
// upstream's time as the limiters' sample.
func (h *Handler) serveAdaptive(q *request) {
	if !h.admitAdaptive(q) {
		return
	}
	defer h.releaseAdaptive(q)
	if len(q.hits) > 0 {
		if q.r.Context().Err() != nil {
			q.ev.Outcome = OutcomeCanceled
			q.w.WriteHeader(499)
			return
		}
		if !h.decide(q) {
			return
		}
	}
	h.proceed(q)
}

// admitAdaptive takes a slot of every adaptive limit of q's route, or
// answers: 503 when one sheds the request, 499 when the client left while
// it waited. A shadow limit holds a slot when it has one and only counts
// what it would have shed.
func (h *Handler) admitAdaptive(q *request) bool {
	rt, r := q.rt, q.r
	lims := q.snap.adaptive[rt]
	q.ad.now = h.now
	for i, l := range rt.Adaptive {
		lim := lims[i]
		p := l.Adaptive.Priority(rt, &q.id, r.Header, r.RemoteAddr)
		v := lim.TryAcquire(p)
		if v == adaptive.Admit {
			q.ad.held = append(q.ad.held, lim)
			continue
		}
		if l.Shadow {
			if v == adaptive.Full {
				lim.CountShed(p)
			}
			continue
		}
		waited := false
		start := h.now()
		switch {
		case v == adaptive.Probe:
			waited = lim.Wait(p, lim.ProbeWait(), true, r.Context().Done())
		case l.Adaptive.MaxDelay > 0:
			waited = lim.Wait(p, l.Adaptive.MaxDelay, false, r.Context().Done())
		}
		if waited {
			q.ev.Delay += h.now().Sub(start)
			q.ad.held = append(q.ad.held, lim)
			continue
		}
		h.releaseHeld(q, adaptive.Ignore, 0)
		if r.Context().Err() != nil {
			q.ev.Outcome = OutcomeCanceled
			q.w.WriteHeader(499)
			return false
		}
		lim.CountShed(p)
		shed(&q.w, &q.ev, l.Name)
		return false
	}
	return true
}

// shed answers a request an adaptive limit refused: 503, since it is the
// upstream's capacity that is spent, not the client's budget (429).
func shed(w *statusWriter, ev *Event, limit string) {
	ev.Outcome = OutcomeShed
	w.Header()["Retry-After"] = headers.IntValue(1)
	headers.WriteProblem(w, headers.Problem{
		Status:     http.StatusServiceUnavailable,
		Title:      "Service Unavailable",
		Detail:     "the upstream is at capacity (limit " + strconv.Quote(limit) + "); retry in 1s",
		RetryAfter: 1,
	})
}

// releaseAdaptive gives back q's slots with what the exchange says of the
// upstream (sample).
func (h *Handler) releaseAdaptive(q *request) {
	if len(q.ad.held) == 0 {
		return
	}
	o, lat := h.sample(q)
	h.releaseHeld(q, o, lat)
}

// sample is what q's exchange says of the upstream, for the adaptive
// limiters, the live and the candidate's alike: its time to the response
// header (to the 101 of an upgrade), from when the request's body had
// arrived if that was later (a slow upload is the client's pace), when it
// answered below 400; a failure (error, timeout, 5xx, 429) with no
// latency, which must not look like spare capacity; nothing for another
// 4xx, when the upstream was not asked or when the client left first.
func (h *Handler) sample(q *request) (adaptive.Outcome, time.Duration) {
	ev := &q.ev
	switch {
	case ev.Upstream <= 0 || q.rt == nil || q.rt.Respond != nil:
		// Not forwarded (limited, canceled, answered by the gateway).
	case ev.Outcome == OutcomeUpstreamError || q.w.status >= 500 || q.w.status == http.StatusTooManyRequests:
		// A 429 is the upstream's own refusal: no room, as a 5xx says.
		return adaptive.Failure, 0
	case q.w.status >= 400:
		// A client's error (a path that does not exist, a missing
		// credential) is the client's choice and usually answered at
		// once: as a sample it would teach a base latency a flood of
		// them sets, after which every real answer looks like a queue.
	case ev.Outcome == OutcomeForwarded:
		lat := ev.Upstream
		if !q.ad.headerAt.IsZero() {
			// The forward began ev.Upstream before it ended, which is
			// about now.
			lat = max(0, ev.Upstream-h.now().Sub(q.ad.headerAt))
			if q.body != nil {
				// A body that arrived slowly: the upstream's time starts
				// once it had all of it.
				if e := q.body.eofAt.Load(); e != 0 {
					if d := q.ad.headerAt.Sub(time.Unix(0, e)); d >= 0 && d < lat {
						lat = d
					}
				}
			}
		}
		return adaptive.Success, lat
	}
	return adaptive.Ignore, 0
}

func (h *Handler) releaseHeld(q *request, o adaptive.Outcome, lat time.Duration) {
	if len(q.ad.held) == 0 {
		return
	}
	now := h.now()
	for _, lim := range q.ad.held {
		lim.Release(now, lat, o)
	}
	clear(q.ad.held)
	q.ad.held = q.ad.held[:0]
}
