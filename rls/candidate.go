package rls

import (
	"context"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/rls/envoyconf"
)

// Candidate is a configuration decided beside the live one: every call
// answered is decided again by its rules on its own store, and the two
// outcomes go to Record. It never changes an answer.
type Candidate struct {
	// Config is the candidate's envoyproxy/ratelimit configuration; nil
	// (a candidate without [rls]) limits nothing.
	Config *envoyconf.Config
	// Store holds the candidate's counters, apart from the live ones.
	Store ratelimit.Store
	// Timeout bounds its store call (0: none).
	Timeout time.Duration
	// Record receives each call's pair of outcomes. It must not keep the
	// CandidateOutcome's slices.
	Record func(*CandidateOutcome)
}

// CandidateOutcome is one call as the live and the candidate
// configurations decided it.
type CandidateOutcome struct {
	At     time.Time
	Domain string
	// Descriptor names the first descriptor either side denied, as
	// "key=value,..." (bounded), "" when neither denied.
	Descriptor string
	// LiveDenied and CandidateDenied are the paths of the rules that
	// denied (shadow rules excluded); a call is denied when its list is
	// not empty.
	LiveDenied, CandidateDenied []string
	// Err is the candidate store's failure; its decision is then unknown.
	Err error
}

// maxCandidateInFlight bounds the candidate decisions running after their
// calls were answered; past it a call decides its candidate before it is
// answered (it waits, nothing is dropped).
const maxCandidateInFlight = 64

// SetCandidate starts deciding every call by c too (nil stops). The
// decisions in flight finish on the one they started with.
func (s *Server) SetCandidate(c *Candidate) {
	if c != nil && (c.Store == nil || c.Record == nil) {
		panic("rls: a candidate needs a store and a recorder")
	}
	s.cand.Store(c)
}

// candidateCall is one call's candidate decision, built on the call's
// path (matching is all CPU) and decided on the store after it.
type candidateCall struct {
	c      *Candidate
	out    CandidateOutcome
	hits   []ratelimit.Hit
	ds     []ratelimit.Decision
	paths  []string // the rule path of each hit
	labels []string // the descriptor label of each hit
	// denied: rules that deny whatever the store says (rate 0).
	denied      []string
	deniedLabel string
}

// candidate decides req by c beside the live answer resp (rules are the
// live rules matched, nil where none). It runs after the answer is built.
func (s *Server) candidate(c *Candidate, now time.Time, req *rlpb.RateLimitRequest, rules []*envoyconf.Rule, resp *rlpb.RateLimitResponse) {
	descs := req.GetDescriptors()
	cc := &candidateCall{c: c, out: CandidateOutcome{At: now, Domain: req.GetDomain()}}
	for i, r := range rules {
		if r != nil && i < len(resp.GetStatuses()) && resp.Statuses[i].GetCode() == rlpb.RateLimitResponse_OVER_LIMIT {
			cc.out.LiveDenied = append(cc.out.LiveDenied, r.Path)
			if cc.out.Descriptor == "" {
				cc.out.Descriptor = descriptorLabel(descs[i])
			}
		}
	}
	// The candidate's rules, matched as the live ones are (the same code).
	var sc scratch
	denyAll := sc.match(c.Config, req, false)
	if denyAll {
		for i, r := range sc.rules[:len(descs)] {
			if r != nil && r.DenyAll && !r.Shadow {
				cc.denied = append(cc.denied, r.Path)
				if cc.deniedLabel == "" {
					cc.deniedLabel = descriptorLabel(descs[i])
				}
			}
		}
	}
	cc.hits = sc.hits
	for _, i := range sc.at {
		r := sc.rules[i]
		path := r.Path
		if r.Shadow {
			path = "" // never a denial
		}
		cc.paths = append(cc.paths, path)
		cc.labels = append(cc.labels, descriptorLabel(descs[i]))
	}
	select {
	case s.candSem <- struct{}{}:
		go func() {
			defer func() { <-s.candSem }()
			cc.decide()
		}()
	default:
		cc.decide()
	}
}

// decide runs the candidate's store decision and records the outcome.
func (cc *candidateCall) decide() {
	c, out := cc.c, &cc.out
	out.CandidateDenied = append(out.CandidateDenied, cc.denied...)
	if out.Descriptor == "" {
		out.Descriptor = cc.deniedLabel
	}
	if len(cc.hits) > 0 {
		ctx := context.Background()
		if c.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.Timeout)
			defer cancel()
		}
		cc.ds = make([]ratelimit.Decision, len(cc.hits))
		if _, err := c.Store.Decide(ctx, cc.out.At, cc.hits, cc.ds); err != nil {
			out.Err = err
			out.CandidateDenied = nil
			c.Record(out)
			return
		}
		for i := range cc.hits {
			if !cc.ds[i].Allowed && cc.paths[i] != "" {
				out.CandidateDenied = append(out.CandidateDenied, cc.paths[i])
				if out.Descriptor == "" {
					out.Descriptor = cc.labels[i]
				}
			}
		}
	}
	c.Record(out)
}
