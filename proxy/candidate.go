package proxy

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// Candidate is a configuration decided beside the live one: every request
// is also decided by its limits on its own store, after the live response
// is complete, and the outcome is given to Record. It never changes a
// response.
type Candidate struct {
	// Policy is the candidate configuration.
	Policy *policy.Policy
	// Store holds the candidate's counters, apart from the live ones.
	Store ratelimit.Store
	// Record receives every request's pair of outcomes. It must not keep
	// the CandidateOutcome's slices.
	Record func(*CandidateOutcome)
}

// CandidateOutcome is one request as the live and the candidate
// configurations decided it.
type CandidateOutcome struct {
	At           time.Time
	Method, Path string
	// Client is the identity the candidate counted ("" when no limit of
	// the candidate applied), ClientKind its source.
	Client, ClientKind string
	// LiveDenied and CandidateDenied name the limits that denied (shadow
	// limits excluded); a request is denied when its list is not empty.
	LiveDenied, CandidateDenied []string
	// Err is the candidate store's failure; the candidate's decision is
	// then unknown and its lists empty.
	Err error
}

// candidateSlot holds the running candidate (nil: none) and the scratch
// space of its decisions.
type candidateSlot struct {
	p    atomic.Pointer[Candidate]
	pool sync.Pool // *candScratch
	// ad are the running candidate's adaptive limiters
	// (candidate_adaptive.go).
	ad atomic.Pointer[candAdaptive]
}

// candScratch is one candidate decision's reusable space.
type candScratch struct {
	hits []ratelimit.Hit
	ds   []ratelimit.Decision
	buf  []byte
	out  CandidateOutcome
	live [4]string
	cand [4]string
}

// SetCandidate starts deciding every request by c too (nil stops). The
// previous candidate's requests in flight finish on it.
func (h *Handler) SetCandidate(c *Candidate) {
	if c != nil && (c.Policy == nil || c.Store == nil || c.Record == nil) {
		panic("proxy: a candidate needs a policy, a store and a recorder")
	}
	h.cand.p.Store(c)
}

// Candidate returns the running candidate, or nil.
func (h *Handler) Candidate() *Candidate { return h.cand.p.Load() }

// decideCandidate decides r by c's limits, after the live response: the
// client has its answer, so the candidate adds no latency to it. Limits
// that count concurrency are skipped (their slots would have to be held
// for the request's duration). A request the live configuration left
// undecided because its client had gone is skipped.
func (h *Handler) decideCandidate(c *Candidate, r *http.Request, q *request) {
	if q.ev.Outcome == OutcomeCanceled && q.decider == nil && len(q.candAd) == 0 {
		// The client went away before the live decision: the live
		// configuration counted nothing, and the candidate, promoted,
		// would count nothing either. Neither decided, it is not recorded.
		return
	}
	p := c.Policy
	sc, _ := h.cand.pool.Get().(*candScratch)
	if sc == nil {
		sc = new(candScratch)
	}
	defer func() {
		clear(sc.hits)
		sc.hits, sc.ds, sc.buf = sc.hits[:0], sc.ds[:0], sc.buf[:0]
		sc.out = CandidateOutcome{}
		h.cand.pool.Put(sc)
	}()
	out := &sc.out
	*out = CandidateOutcome{At: q.ev.Start, Method: r.Method, Path: q.ev.Path,
		LiveDenied: sc.live[:0], CandidateDenied: sc.cand[:0]}
	h.settleCandidate(q, out) // candidate_adaptive.go
	if q.ev.Outcome == OutcomeLimited {
		for i := range q.hits {
			if i < len(q.ds) && !q.ds[i].Allowed && !q.hits[i].Limit.Shadow {
				out.LiveDenied = append(out.LiveDenied, q.hits[i].Limit.Name)
			}
		}
	}
	raw := r.URL.RawPath
	if raw == "" {
		raw = r.URL.EscapedPath()
	}
	rt, path, err := p.Match(r.Host, r.Method, raw)
	if err != nil || rt == nil || len(rt.Limits) == 0 {
		c.Record(out)
		return
	}
	id := p.Identity.Identify(r, h.identityClock(p))
	if id.Rejected {
		c.Record(out)
		return
	}
	out.Client, out.ClientKind = id.Client, id.ClientKind.String()
	hits, buf := sc.hits, sc.buf
	for _, l := range rt.Limits {
		if l.Exempt(&id) || l.Algorithm == ratelimit.Concurrency {
			continue
		}
		var xr exprResult
		if l.Exprs != nil {
			// Evaluated as the live path does (limit_expr.go); a failure
			// the candidate would answer 400 counts nothing here.
			var err error
			if xr, _, err = evalExprs(l.Exprs, candidateVars(q, r, &id, rt, path)); err != nil || xr.skip {
				continue
			}
		}
		cost, err := l.RequestCost(r.Header, r.RemoteAddr)
		if xr.cost > 0 {
			cost, err = xr.cost, nil
		}
		if err != nil {
			continue
		}
		parts, ok := l.KeyParts(&id, r.Header)
		vals := keys.Values{Route: rt.Name, Method: r.Method, Header: r.Header}
		if xr.keyed {
			parts, ok = exprKeyParts(l, &xr, &vals), true
		}
		if !ok {
			continue
		}
		value, ok := l.DistinctValue(p.Identity, &id, &vals, q.path, xr.distinct)
		if !ok {
			continue
		}
		mode := ratelimit.HitCount
		if l.Response != nil && l.Response.Usage != nil {
			// A token budget: the usage the live answer reported
			// (candidate_usage.go), checked and counted at once.
			if cost = liveUsage(q, l.Name, cost); cost == 0 {
				cost, mode = 1, ratelimit.HitPeek
			}
		}
		n := len(buf)
		buf = p.Identity.AppendKey(buf, parts, &id, &vals)
		hits = append(hits, ratelimit.Hit{Limit: l.For(&id), Key: string(buf[n:]), Cost: cost, Value: value, Mode: mode})
	}
	sc.hits, sc.buf = hits, buf
	if len(hits) == 0 {
		c.Record(out)
		return
	}
	sc.ds = grow(sc.ds, len(hits))
	ds := sc.ds
	// The client may be gone; the candidate still counts its request. A
	// store that cannot block needs no deadline (as in decide).
	ctx := context.WithoutCancel(r.Context())
	if nb, ok := c.Store.(NonBlocking); !ok || !nb.NonBlocking() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Store.Timeout)
		defer cancel()
	}
	_, err = c.Store.Decide(ctx, q.ev.Start, hits, ds)
	if err != nil {
		out.Err = err
		c.Record(out)
		return
	}
	for i := range hits {
		if !ds[i].Allowed && !hits[i].Limit.Shadow {
			out.CandidateDenied = append(out.CandidateDenied, hits[i].Limit.Name)
		}
	}
	c.Record(out)
}
