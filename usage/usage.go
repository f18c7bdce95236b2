// Package usage exports the units each consumer's requests counted, for
// billing and dashboards: an Observer of the proxy that adds every counted
// hit to an in-memory aggregate (one entry per consumer, limit and
// period), and a sender that posts the aggregate to an HTTP sink as
// CloudEvents at most every flush interval, at least once: each record
// carries an id that a retry repeats, so a receiver that deduplicates by
// it counts every unit exactly once. It also posts threshold notices: the
// first time in a period that a consumer's usage of a limit crosses one of
// the limit's notify_at fractions.
//
// The request path only adds to the aggregate under a shard's lock; the
// sink is only ever called from the sender's goroutine, so a slow or dead
// sink never slows a request. Memory is bounded by MaxPending entries
// (see Options.MaxPending for what happens past it).
//
// Standard library only (and the proxy's Event it observes).
package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/internal/logthrottle"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// Defaults of Options' zero fields.
const (
	DefaultFlushInterval = 10 * time.Second
	DefaultTimeout       = 10 * time.Second
	DefaultMaxPending    = 100000
	DefaultBatchSize     = 100
	// DefaultStopTimeout bounds the final flush at a graceful stop.
	DefaultStopTimeout = 10 * time.Second
)

// rejectAttempts is how many times a batch the sink refuses as such (a
// 3xx, or a 4xx other than 408 and 429) is posted before it is dropped:
// a refusal that a few retries do not change is the receiver's verdict on
// the records, and retrying it forever would stop every later record.
const rejectAttempts = 3

// initialBackoff is the first wait after a failed post; it doubles (with
// jitter) up to maxBackoff.
const initialBackoff = 100 * time.Millisecond

// Claimer decides, across every gateway sharing a store, which one posts a
// threshold notice: Claim returns true for exactly one owner per key
// until ttl has passed, and true again when that owner claims the key
// again: a claim whose answer was lost (a timeout after the store set
// the key) is retried, and must not then find the key taken by nobody
// who will post (Redis: SET key owner NX PX ttl, or the key's value is
// owner). A nil Claimer makes each process decide for itself.
type Claimer interface {
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
}

// Options configures an Exporter.
type Options struct {
	// Sink is the http:// or https:// URL records are posted to; user
	// info in it is sent as basic authentication and never logged.
	Sink string
	// FlushInterval is the least time between two records of one
	// consumer, limit and period. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// Timeout bounds one post, its answer's body included. Default
	// DefaultTimeout.
	Timeout time.Duration
	// MaxPending bounds the aggregate's entries (consumer, limit,
	// period) not yet delivered, and separately the threshold notices
	// remembered or waiting. While the sink is down, units of an entry
	// already held keep merging into it (nothing is lost); units that
	// would need a new entry past the bound are dropped, counted in
	// Stats.DroppedUnits and logged. Default DefaultMaxPending.
	MaxPending int
	// BatchSize is the most records in one post. Default
	// DefaultBatchSize.
	BatchSize int
	// StopTimeout bounds the final flush of Close. Default
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// Source is the CloudEvents source of every record. Default
	// "/tollgate".
	Source string
	// Claimer, when set, makes threshold notices once per period across
	// the fleet; nil: once per period per process.
	Claimer Claimer
	// ClaimPrefix is put before every Claimer key (the store's prefix).
	ClaimPrefix string
	// Logger receives the sender's failures (at most one line a second
	// about each kind). Default slog.Default().
	Logger *slog.Logger
	// Client posts the records; nil builds one with Timeout that follows
	// no redirect.
	Client *http.Client
}

// Stats are the exporter's counters since it started.
type Stats struct {
	// Records and Notices are the usage records and threshold notices
	// the sink accepted (2xx).
	Records, Notices int64
	// Units are the units in the accepted usage records.
	Units int64
	// Failures are the posts that failed (an error or a status other
	// than 2xx); each is retried or, refused rejectAttempts times,
	// dropped.
	Failures int64
	// DroppedUnits are units not exported: they needed a new entry while
	// MaxPending were held, or were in records the sink refused, or were
	// still undelivered when the final flush ran out of time.
	DroppedUnits int64
	// DroppedRecords are the records (usage and notices) dropped for the
	// same reasons; DroppedNotices the threshold crossings not noticed
	// because MaxPending were remembered.
	DroppedRecords, DroppedNotices int64
	// Pending is the aggregate's entries plus the records in flight.
	Pending int64
}

// Exporter is the usage Observer and its sender. Create it with New,
// feed it with Observe, stop it with Close.
type Exporter struct {
	o        Options
	sink     *url.URL
	redacted string
	log      *slog.Logger
	client   *http.Client
	instance string

	agg     aggregate
	periods periods
	notices noticeBook
	notify  atomic.Pointer[map[string][]float64]

	// seq numbers the records this process cut (ids are instance-seq).
	seq atomic.Uint64

	records, notes, units, failures       atomic.Int64
	droppedUnits, droppedRecords, dropped atomic.Int64
	inFlight                              atomic.Int64

	dropLog, failLog, claimLog logthrottle.Throttle

	stopping  chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	runCtx    context.Context
	cancelRun context.CancelFunc
	// frozen is the batch being delivered: its records' ids and units are
	// fixed from its first attempt on (a retry must repeat them). Only
	// the sender goroutine touches it.
	frozen []record
	// frozenKey is the frozen batch's Idempotency-Key.
	frozenKey string
}

// New checks o, fills its defaults and starts the sender.
func New(o Options) (*Exporter, error) {
	u, err := ParseSink(o.Sink)
	if err != nil {
		return nil, err
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Source == "" {
		o.Source = "/tollgate"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := o.Client
	if c == nil {
		c = &http.Client{
			Timeout: o.Timeout,
			// A redirect is the sink's answer, not a place to send
			// billing records (and their credentials) to.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	e := &Exporter{o: o, sink: u, redacted: Redact(u), log: o.Logger, client: c,
		instance: hex.EncodeToString(id[:]), stopping: make(chan struct{}), done: make(chan struct{})}
	e.agg.init(o.MaxPending)
	e.notices.init(o.MaxPending)
	empty := map[string][]float64{}
	e.notify.Store(&empty)
	e.runCtx, e.cancelRun = context.WithCancel(context.Background())
	go e.run()
	return e, nil
}

// ParseSink checks a sink URL: absolute http or https with a host, no
// fragment.
func ParseSink(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url's error quotes the URL, user info included.
		return nil, errors.New("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("no host")
	case u.Fragment != "" || u.RawFragment != "":
		return nil, errors.New("a fragment is never sent; remove it")
	}
	return u, nil
}

// Redact returns u as logs may show it: without user info or query (a
// token may hide in either).
func Redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// SetNotify sets the notify_at fractions of each limit by name (nil or
// empty: no notices). A reload calls it; it is safe at any time.
func (e *Exporter) SetNotify(m map[string][]float64) {
	if m == nil {
		m = map[string][]float64{}
	}
	e.notify.Store(&m)
}

// Observe implements proxy.Observer: every counted hit of a registered
// consumer is added to the aggregate, and its decision checked against
// the limit's notify_at fractions. It never blocks on the sink.
func (e *Exporter) Observe(ev *proxy.Event) {
	if ev.Consumer == "" || len(ev.Hits) == 0 {
		return
	}
	notify := *e.notify.Load()
	for i := range ev.Hits {
		h := &ev.Hits[i]
		l := h.Limit
		if l == nil || l.Algorithm == ratelimit.Concurrency || len(l.Rates) == 0 || l.IsPenaltyBox() {
			continue
		}
		var d *ratelimit.Decision
		if i < len(ev.Decisions) {
			d = &ev.Decisions[i]
		}
		at := ev.Start
		if d != nil && d.At != 0 {
			at = time.UnixMicro(d.At) // the store's own clock decided
		}
		decided := at
		if h.Mode == ratelimit.HitPeek && !ev.CountedAt.IsZero() {
			// Counted by response: its units belong to the period the
			// response was counted in, as the store counted them.
			at = ev.CountedAt
		}
		units := countedUnits(ev, i, d)
		if units > 0 {
			e.add(ev.Consumer, ev.Plan, l, at, units)
		}
		if fs := notify[l.Name]; len(fs) > 0 && d != nil {
			e.checkThresholds(ev.Consumer, ev.Plan, h, d, decided, at, units, fs)
		}
	}
}

// countedUnits is what hit i finally counted: Event.Counted when the
// response decided it, else the hit's cost when its decision counted it
// (an enforced hit of an allowed request, a shadow hit its own limit
// allowed; never a peek or a denied request).
func countedUnits(ev *proxy.Event, i int, d *ratelimit.Decision) int64 {
	if ev.Counted != nil {
		if i < len(ev.Counted) && ev.Counted[i] > 0 {
			return ev.Counted[i]
		}
		return 0
	}
	if d == nil || !d.Counted || ev.Hits[i].Mode == ratelimit.HitPeek {
		return 0
	}
	return ev.Hits[i].Cost
}

// Stats returns the exporter's counters.
func (e *Exporter) Stats() Stats {
	return Stats{
		Records: e.records.Load(), Notices: e.notes.Load(), Units: e.units.Load(),
		Failures: e.failures.Load(), DroppedUnits: e.droppedUnits.Load(),
		DroppedRecords: e.droppedRecords.Load(), DroppedNotices: e.dropped.Load(),
		Pending: e.agg.len() + e.inFlight.Load() + int64(e.pendingNotices()),
	}
}

// Close stops the sender after a final flush of everything aggregated,
// bounded by StopTimeout (and the wait for it by ctx); what is still
// undelivered then is counted as dropped and logged. Call it once the
// servers have drained.
func (e *Exporter) Close(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stopping) })
	// The final flush bounds itself by StopTimeout (its posts end with
	// it), so waiting for it is bounded; ctx may cut the wait shorter.
	e.cancelRun() // an ordinary cycle's post in flight gives way to the final one
	select {
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// run is the sender: a cycle every FlushInterval, a final one at Close.
func (e *Exporter) run() {
	defer close(e.done)
	t := time.NewTicker(e.o.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.cycle(e.runCtx, false)
		case <-e.stopping:
			ctx, cancel := context.WithTimeout(context.Background(), e.o.StopTimeout)
			e.cycle(ctx, true)
			cancel()
			e.abandon()
			return
		}
	}
}

// abandon counts and logs what the final flush could not deliver.
func (e *Exporter) abandon() {
	recs, units := len(e.frozen), int64(0)
	for _, r := range e.frozen {
		units += r.units
	}
	e.frozen = nil
	n, u := e.agg.drain()
	recs += n + len(e.takeReady())
	units += u
	e.notices.mu.Lock()
	recs += len(e.notices.pending)
	e.notices.pending = nil
	e.notices.mu.Unlock()
	if recs == 0 {
		return
	}
	e.droppedRecords.Add(int64(recs))
	e.droppedUnits.Add(units)
	e.inFlight.Store(0)
	e.log.Warn("usage: records not delivered at stop", "sink", e.redacted, "records", recs, "units", units)
}
