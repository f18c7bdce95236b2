package override

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// DefaultInterval is the poll interval when Options.Interval is 0: half a
// second, so that every gateway sees a change within one second.
const DefaultInterval = 500 * time.Millisecond

// Options configure a Sync.
type Options struct {
	// Interval is the poll interval. Default DefaultInterval.
	Interval time.Duration
	// Timeout bounds one read of the table. Default 1s.
	Timeout time.Duration
	// Changed, when set, is called after a read that changed the table
	// (the gateway forgets cached denials there).
	Changed func()
	// Logger reports failed reads, once per failure streak; nil uses
	// slog.Default().
	Logger *slog.Logger
}

// Sync is one gateway's copy of an override table. It is safe for
// concurrent use.
type Sync struct {
	table ratelimit.OverrideTable
	o     Options

	// readMu serializes reads of the table; mu serializes changes of
	// state, so that a compilation for a new policy never waits for a
	// slow read.
	readMu  sync.Mutex
	mu      sync.Mutex
	state   atomic.Pointer[state]
	failing bool

	stop chan struct{}
	done chan struct{}
}

// state is one version of the table, and its compilation against one
// policy.
type state struct {
	version  uint64
	list     []ratelimit.Override
	p        *policy.Policy
	compiled *Table
}

// New returns a Sync of table; it reads nothing until Refresh or Start.
func New(table ratelimit.OverrideTable, o Options) *Sync {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Sync{table: table, o: o}
	s.state.Store(&state{})
	return s
}

// Refresh reads the table if its version changed. On failure the copy
// held so far stays in force.
func (s *Sync) Refresh(ctx context.Context) error {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	v, list, err := s.table.Overrides(ctx, s.state.Load().version)
	if err != nil {
		if !s.failing {
			s.o.Logger.Warn("overrides: reading the table failed; the overrides read before stay in force", "err", err)
			s.failing = true
		}
		return err
	}
	if s.failing {
		s.o.Logger.Info("overrides: the table is readable again")
		s.failing = false
	}
	s.mu.Lock()
	cur := s.state.Load()
	if v == cur.version {
		s.mu.Unlock()
		return nil
	}
	next := &state{version: v, list: list}
	if cur.p != nil {
		next.p, next.compiled = cur.p, compile(cur.p, list)
	}
	s.state.Store(next)
	s.mu.Unlock()
	if s.o.Changed != nil {
		s.o.Changed()
	}
	return nil
}

// For returns the table compiled against p: nil when it holds nothing.
// The compilation is kept until the table or the policy changes.
func (s *Sync) For(p *policy.Policy) *Table {
	if s == nil {
		return nil
	}
	st := s.state.Load()
	if st.p == p {
		return st.compiled
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st = s.state.Load()
	if st.p != p {
		st = &state{version: st.version, list: st.list, p: p, compiled: compile(p, st.list)}
		s.state.Store(st)
	}
	return st.compiled
}

// compile is Compile, but nil (none) for an empty table.
func compile(p *policy.Policy, list []ratelimit.Override) *Table {
	if len(list) == 0 {
		return nil
	}
	return Compile(p, list)
}

// Start polls the table every Options.Interval until Stop.
func (s *Sync) Start() {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.o.Interval)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout)
			_ = s.Refresh(ctx)
			cancel()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the polling Start began and waits for it.
func (s *Sync) Stop() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop = nil
}
