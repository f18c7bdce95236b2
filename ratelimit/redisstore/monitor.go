package redisstore

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Intervals and threshold of a Monitor's checks.
const (
	skewEvery     = time.Minute
	evictionEvery = 5 * time.Minute
	// skewWarn is the clock skew against Redis above which a gateway
	// deciding on its own clock warns: two gateways that far apart admit
	// noticeably more than a limit of a few seconds' window.
	skewWarn = 250 * time.Millisecond
)

// Monitor runs the checks an operator needs beside a Store and that no
// decision makes: the skew of the decision clock against Redis's TIME
// (with ratelimit.ClockLocal, a warning above 250ms, since gateways that disagree
// admit more than a limit) every minute, and Redis's maxmemory-policy
// (WarnEvictionPolicy) every five minutes, as a later CONFIG SET is
// common. Create it with NewMonitor, call Start once and Stop once.
type Monitor struct {
	store *Store
	log   *slog.Logger

	skew     atomic.Int64 // the last measured skew (ns)
	skewOK   atomic.Bool  // skew holds a measurement
	eviction string       // the last maxmemory-policy seen; the loop's only after Start
	stop     chan struct{}
	wg       sync.WaitGroup
}

// NewMonitor returns a Monitor of s that logs on log. It does not start
// checking until Start.
func NewMonitor(s *Store, log *slog.Logger) *Monitor {
	return &Monitor{store: s, log: log, stop: make(chan struct{})}
}

// CheckEviction reads Redis's eviction policy now and warns when it is not
// noeviction (WarnEvictionPolicy). Call it before Start: afterwards only
// the background loop checks.
func (m *Monitor) CheckEviction(ctx context.Context) {
	m.eviction = WarnEvictionPolicy(ctx, m.store.client, m.log, m.eviction)
}

// Start measures the clock skew of now (nil: time.Now), the clock the
// gateway decides with, then starts the background checks.
func (m *Monitor) Start(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	m.checkSkew(now)
	m.wg.Add(1)
	go m.watch(now)
}

// Stop stops the background checks and waits for them to end. It is safe
// without Start; call it once.
func (m *Monitor) Stop() {
	close(m.stop)
	m.wg.Wait()
}

// Skew returns the last measured clock skew (Redis's clock minus the
// decision clock), and false when none was measured yet.
func (m *Monitor) Skew() (time.Duration, bool) {
	return time.Duration(m.skew.Load()), m.skewOK.Load()
}

// watch re-measures the clock skew every skewEvery and re-reads the
// eviction policy every evictionEvery.
func (m *Monitor) watch(now func() time.Time) {
	defer m.wg.Done()
	skew := time.NewTicker(skewEvery)
	defer skew.Stop()
	evict := time.NewTicker(evictionEvery)
	defer evict.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-skew.C:
			m.checkSkew(now)
		case <-evict.C:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			m.CheckEviction(ctx)
			cancel()
		}
	}
}

// checkSkew measures the skew of now against Redis's TIME and, when the
// store decides on the gateway's own clock, warns above skewWarn.
func (m *Monitor) checkSkew(now func() time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := m.store.ClockSkew(ctx, now)
	if err != nil {
		m.log.Debug("cannot measure the clock skew against Redis", "err", err)
		return
	}
	m.skew.Store(int64(d))
	m.skewOK.Store(true)
	if m.store.opts.Clock == ratelimit.ClockLocal && d.Abs() > skewWarn {
		m.log.Warn("this gateway's clock differs from Redis's; with store.clock = \"local\" gateways that disagree admit more than a limit "+
			"(set store.clock = \"store\", or synchronise the clocks)", "skew", d.String(), "warn_above", skewWarn.String())
	}
}
