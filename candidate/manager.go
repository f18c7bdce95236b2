package candidate

import (
	"errors"
	"sync"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// Options configure a Manager.
type Options struct {
	// Handler is the live request handler the candidate runs beside.
	Handler *proxy.Handler
	// Compile validates and compiles a candidate configuration the way a
	// reload does. Required for POST.
	Compile func(data []byte) (*policy.Policy, error)
	// NewStore returns a fresh store for a candidate's counters, apart
	// from the live ones. Required.
	NewStore func(p *policy.Policy) (ratelimit.Store, error)
	// Promote makes p the live configuration, as a reload would.
	// Required.
	Promote func(p *policy.Policy) error
	// Now is the clock of reports; nil uses time.Now.
	Now func() time.Time
	// Client is how a client (kind, value) appears in reports; nil
	// hashes it with a random salt per candidate.
	Client func(kind, value string) string
	// RLS, when set, runs the candidate beside the rate limit service
	// too: called with the candidate's policy, store and recorder when
	// one starts, and with nil ones when it stops or is promoted.
	RLS func(p *policy.Policy, st ratelimit.Store, record func(*proxy.CandidateOutcome))
}

// Manager holds at most one running candidate.
type Manager struct {
	o   Options
	mu  sync.Mutex
	cur *running
}

// running is one installed candidate.
type running struct {
	p      *policy.Policy
	store  ratelimit.Store
	stats  *Stats
	source string
}

// ErrNone is the error of an operation that needs a running candidate.
var ErrNone = errors.New("no candidate configuration is running")

// NewManager returns a Manager with no candidate.
func NewManager(o Options) *Manager {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Manager{o: o}
}

// Start runs p as the candidate (source says where it came from),
// replacing the running one and its counters.
func (m *Manager) Start(p *policy.Policy, source string) error {
	st, err := m.o.NewStore(p)
	if err != nil {
		return err
	}
	r := &running{p: p, store: st, stats: NewStats(m.o.Now(), m.o.Client), source: source}
	m.mu.Lock()
	old := m.cur
	m.cur = r
	m.o.Handler.SetCandidate(&proxy.Candidate{Policy: p, Store: st, Record: r.stats.Record})
	if m.o.RLS != nil {
		m.o.RLS(p, st, r.stats.Record)
	}
	m.mu.Unlock()
	old.retire()
	return nil
}

// Stop removes the running candidate; false if there was none.
func (m *Manager) Stop() bool {
	m.mu.Lock()
	old := m.cur
	m.cur = nil
	m.o.Handler.SetCandidate(nil)
	m.stopRLS()
	m.mu.Unlock()
	old.retire()
	return old != nil
}

// Report returns the running candidate's record.
func (m *Manager) Report() (Report, error) {
	m.mu.Lock()
	r := m.cur
	m.mu.Unlock()
	if r == nil {
		return Report{}, ErrNone
	}
	return r.stats.Report(r.source), nil
}

// Promote makes the running candidate the live configuration and stops
// it; the live store keeps the counters of the limits both share. It
// returns the candidate's last report.
func (m *Manager) Promote() (Report, error) {
	m.mu.Lock()
	r := m.cur
	if r == nil {
		m.mu.Unlock()
		return Report{}, ErrNone
	}
	if err := m.o.Promote(r.p); err != nil {
		m.mu.Unlock()
		return Report{}, err
	}
	m.cur = nil
	m.o.Handler.SetCandidate(nil)
	m.stopRLS()
	m.mu.Unlock()
	rep := r.stats.Report(r.source)
	r.retire()
	return rep, nil
}

// stopRLS stops the candidate beside the rate limit service.
func (m *Manager) stopRLS() {
	if m.o.RLS != nil {
		m.o.RLS(nil, nil, nil)
	}
}

// retireDelay is how long a removed candidate's store stays open for the
// requests still deciding on it.
const retireDelay = 5 * time.Second

// retire closes r's store once the requests that started with it are done.
func (r *running) retire() {
	if r == nil {
		return
	}
	time.AfterFunc(retireDelay, func() { _ = r.store.Close() })
}
