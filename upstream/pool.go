package upstream

import (
	"net/url"
	"sync/atomic"
)

// Target is one address a route forwards to.
type Target struct {
	// URL is where requests go, with the host resolved to an address when
	// the configured one was a DNS name. Read-only.
	URL *url.URL
	// Name is the configured target URL, the target's name in metrics,
	// /readyz and the dashboard (every address of one DNS name shares it).
	Name string
	// Weight is the target's share relative to the others, ≥ 1.
	Weight int
	// H2C is set for cleartext HTTP/2 with prior knowledge.
	H2C bool

	// unhealthy is set by the active health check.
	unhealthy atomic.Bool
	// inflight counts the requests being forwarded to the target.
	inflight atomic.Int64
}

// Healthy reports whether the target may take requests: its active
// health check (if any) passes and it is not ejected.
func (t *Target) Healthy() bool { return !t.unhealthy.Load() }

// InFlight returns the number of requests being forwarded to t.
func (t *Target) InFlight() int64 { return t.inflight.Load() }

// Pool is one route's targets at run time. It is safe for concurrent
// use.
type Pool struct {
	route string
	spec  *Spec
	// targets is the current target list: the configured ones, with DNS
	// names replaced by the addresses they resolve to.
	targets atomic.Pointer[[]*Target]
	next    atomic.Uint64
}

// newPool returns the Pool of route's spec s, its targets as configured.
func newPool(route string, s *Spec) *Pool {
	p := &Pool{route: route, spec: s}
	ts := make([]*Target, 0, len(s.Targets))
	for _, t := range s.Targets {
		ts = append(ts, &Target{URL: t.URL, Name: t.URL.String(), Weight: t.Weight, H2C: t.H2C})
	}
	p.targets.Store(&ts)
	return p
}

// Route returns the name of the route p serves.
func (p *Pool) Route() string { return p.route }

// Spec returns the configuration p runs. Read-only.
func (p *Pool) Spec() *Spec { return p.spec }

// Targets returns the current targets. Read-only.
func (p *Pool) Targets() []*Target { return *p.targets.Load() }

// Pick returns the target for a request whose hash key is key (used by
// Hash balancing), skipping the targets already tried; nil when no
// target is left.
func (p *Pool) Pick(key uint64, tried []*Target) *Target {
	ts := p.Targets()
	for range ts {
		t := ts[p.next.Add(1)%uint64(len(ts))]
		if t.Healthy() && !contains(tried, t) {
			return t
		}
	}
	return nil
}

// Begin marks a request forwarded to t; End must follow, with whether
// the exchange failed (a connection that failed, or a 5xx answer).
func (p *Pool) Begin(t *Target) { t.inflight.Add(1) }

// End marks the end of a request Begin marked.
func (p *Pool) End(t *Target, failed bool) { t.inflight.Add(-1) }

// Healthy returns the number of targets that may take requests.
func (p *Pool) Healthy() int {
	n := 0
	for _, t := range p.Targets() {
		if t.Healthy() {
			n++
		}
	}
	return n
}

func contains(ts []*Target, t *Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
