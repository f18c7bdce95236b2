package upstream

import (
	"context"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/internal/logthrottle"
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
	// Host is the configured URL's host (with its port when one was
	// written): the Host header that requests to the target carry, which
	// differs from URL.Host when the configured host is a DNS name that
	// URL.Host resolved to an address. The proxy sets the outgoing Host to
	// it (ReverseProxy's SetURL would send the address).
	Host string
	// ServerName is the name an https target's certificate is verified
	// against (TLS SNI): the configured host without its port; "" when
	// the configured host is an IP address (Go's default applies).
	// http.Transport takes the server name from the URL it dials, so a
	// target resolved from a name needs a transport whose TLS config
	// names it: one per ServerName, as the health probes keep (prober),
	// which also keeps different names' connections to one address apart.
	ServerName string

	// unhealthy is set by the active health check (health.go); only the
	// probes of the Pool that owns the target write it.
	unhealthy atomic.Bool
	// probe is the active health check's state of the target.
	probe probeState
	// inflight counts the requests being forwarded to the target.
	inflight atomic.Int64
	// out is the passive health (outlier ejection) state.
	out outlierState
}

// Healthy reports whether the target may take requests: its active
// health check (if any) passes and it is not ejected. An ejection ends
// here, when its time is up: no goroutine or timer runs per target.
func (t *Target) Healthy() bool { return !t.unhealthy.Load() && !t.out.ejected() }

// InFlight returns the number of requests being forwarded to t.
func (t *Target) InFlight() int64 { return t.inflight.Load() }

// Ejected reports whether passive health has ejected t (its ejection has
// not run out).
func (t *Target) Ejected() bool { return t.out.ejected() }

// Pool is one route's targets at run time. It is safe for concurrent
// use.
type Pool struct {
	route string
	spec  *Spec
	// targets is the current target list: the configured ones, with DNS
	// names replaced by the addresses they resolve to.
	targets atomic.Pointer[[]*Target]
	// bal is the balancing state precomputed for one target list (the
	// list it was built for is in it): a list replaced by DNS gets its
	// own on the next Pick.
	bal atomic.Pointer[balancer]
	// budget counts the route's requests and retries.
	budget *Budget
	// now is the clock of ejections and the retry budget.
	now func() time.Time
	// ejectMu serialises ejections, so that two targets failing at once
	// cannot both take the last ejection the route allows.
	ejectMu sync.Mutex
	// rand draws least request's targets (nil: math/rand/v2).
	rand func() uint64

	// setMu orders the writers of targets (DNS resolution, the
	// registry's carry-over).
	setMu sync.Mutex
	// names is the DNS state of the targets whose host is a name
	// (resolve.go); nil when every host is an address.
	names []*name
	// cancel stops the background work start began; wg counts its
	// goroutines (the loops and the probes in flight).
	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    *slog.Logger
	// logs throttles the lines about the targets' health changes.
	logs logthrottle.Throttle
	// h1 keeps the connections of the plain-HTTP probes.
	h1 h1Conns
}

// newPool returns the Pool of route's spec s, its targets as configured
// (a DNS name stays a name until it resolves); nothing runs until start.
func newPool(route string, s *Spec) *Pool {
	p := &Pool{route: route, spec: s, now: time.Now, log: slog.Default()}
	p.budget = NewBudget(s.Budget, p.clock)
	ts := make([]*Target, 0, len(s.Targets))
	for _, t := range s.Targets {
		ts = append(ts, newTarget(t, t.URL.Host))
	}
	var none []*Target
	p.targets.Store(&none) // setTargets reads the list it replaces
	p.setTargets(ts)
	return p
}

// clock reads p.now; the budget and the targets' ejections read it
// through here, so that a test's fake clock reaches them all.
func (p *Pool) clock() time.Time { return p.now() }

// newTarget returns the target of spec t at address host ("host:port",
// the configured host itself when it is not resolved).
func newTarget(t TargetSpec, host string) *Target {
	u := *t.URL
	u.Host = host
	tg := &Target{URL: &u, Name: t.URL.String(), Weight: t.Weight, H2C: t.H2C, Host: t.URL.Host}
	if _, err := netip.ParseAddr(t.URL.Hostname()); err != nil {
		tg.ServerName = t.URL.Hostname()
	}
	return tg
}

// key identifies a target across target lists: its configured name and
// the address it is sent to.
func (t *Target) key() targetKey { return targetKey{t.Name, t.URL.Host, t.Weight, t.H2C} }

type targetKey struct {
	name, addr string
	weight     int
	h2c        bool
}

// setTargets makes ts the target list, keeping the *Target (and so its
// health, ejection and balancing state) of every target in the current
// list that ts names again: readers holding the old list see the same
// targets, and a re-resolution that returns the same addresses changes
// nothing. It returns the list now in force.
func (p *Pool) setTargets(ts []*Target) []*Target {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	out := reuse(ts, p.Targets())
	for _, t := range out {
		t.out.now = p.clock
	}
	p.targets.Store(&out)
	return out
}

// reuse returns ts with each target that old lists too (same name,
// address, weight and protocol) replaced by old's.
func reuse(ts, old []*Target) []*Target {
	byKey := make(map[targetKey]*Target, len(old))
	for _, t := range old {
		byKey[t.key()] = t
	}
	out := make([]*Target, len(ts))
	for i, t := range ts {
		if o := byKey[t.key()]; o != nil {
			t = o
		}
		out[i] = t
	}
	return out
}

// Route returns the name of the route p serves.
func (p *Pool) Route() string { return p.route }

// Spec returns the configuration p runs. Read-only.
func (p *Pool) Spec() *Spec { return p.spec }

// Targets returns the current targets. Read-only.
func (p *Pool) Targets() []*Target { return *p.targets.Load() }

// Budget returns the route's retry budget.
func (p *Pool) Budget() *Budget { return p.budget }

// Pick returns the target for a request, skipping the targets already
// tried and those that are not Healthy; nil when no target is left. key
// is the request's hash key (HashKey) for Hash balancing; 0 (no key)
// picks by weighted round robin instead.
func (p *Pool) Pick(key uint64, tried []*Target) *Target {
	lp := p.targets.Load()
	b := p.bal.Load()
	if b == nil || b.list != lp {
		b = newBalancer(lp, p.rand)
		p.bal.Store(b)
	}
	switch {
	case p.spec.Balance == LeastRequest:
		return b.leastRequest(tried)
	case p.spec.Balance == Hash && key != 0:
		return b.hash(key, tried)
	}
	return b.roundRobin(tried)
}

// Begin marks a request forwarded to t; End must follow.
func (p *Pool) Begin(t *Target) { t.inflight.Add(1) }

// End marks the end of a request Begin marked, with whether the exchange
// failed (a connection that failed, a timeout, a 502, 503 or 504): passive health
// counts the failures in a row.
func (p *Pool) End(t *Target, failed bool) {
	t.inflight.Add(-1)
	o := &p.spec.Outlier
	if o.ConsecutiveFailures <= 0 {
		return
	}
	if !failed {
		t.out.success(o.BaseEjection)
		return
	}
	if t.out.failure() >= int64(o.ConsecutiveFailures) {
		p.eject(t)
	}
}

// Release ends a request Begin marked whose exchange says nothing of the
// target's health (the client went away, or the route's timeout ended it
// while the client's body was still arriving): its failures in a row
// neither grow nor start again.
func (p *Pool) Release(t *Target) { t.inflight.Add(-1) }

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
