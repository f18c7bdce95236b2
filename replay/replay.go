// Package replay runs an access log through a policy on a virtual clock, so
// that an operator can try a limit on yesterday's traffic before enforcing
// it.
//
// Every well-formed line becomes a synthetic *http.Request served by the
// live request path itself — proxy.Handler with an in-memory store, the
// log's timestamps as its clock and a transport that answers 200 without
// touching the network — and the decisions are read back through
// proxy.Observer. Lines are decided in the order their requests started,
// not the order they were written (a reorder buffer sized by the longest
// latency in the log: see Options.ReorderWindow). Beside every approximate
// limit (sliding_window_counter) an exact sliding log of the same rates,
// fed the same admitted history, counts the decisions on which the two
// disagree (accuracy.Referee). A line of the rate limit service
// (accesslog.RLSCall) is decided by rls.Server's ShouldRateLimit on the
// same store and clock, and compared with the answer the line logged
// (Report.RLS).
//
// What a log line cannot carry is approximated, as documented on Run:
// hashed identities replay as distinct opaque identities (bucket membership
// is kept, exemptions by IP or API key cannot match), the Host header comes
// from the logged route, the cost is each limit's static cost, and a
// concurrency limit never binds because every replayed request completes
// at once.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// DefaultMaxReported is how many malformed lines Run prints when
// Options.MaxReported is 0.
const DefaultMaxReported = 20

// Options configure Run.
type Options struct {
	// Format is the log's format; accesslog.Auto (the zero value) tells
	// combined and jsonl apart line by line.
	Format accesslog.Format
	// Errors receives one line per malformed log line ("line N: reason"),
	// up to MaxReported, then a count of the rest. Nil discards them; the
	// Report counts them either way.
	Errors io.Writer
	// MaxReported bounds the malformed lines written to Errors. Default
	// DefaultMaxReported.
	MaxReported int
	// MaxKeys bounds the in-memory store. Default the policy's
	// store.memory.max_keys.
	MaxKeys int
	// ReorderWindow is the longest latency the reorder buffer allows for
	// (lines are logged when their request finishes, stamped with its
	// start). Default: the longest latency in the log, read in a first
	// pass when the log can seek; otherwise the longest latency seen so
	// far, so that the first line slower than all before it may come too
	// late to be put in order (see Report.Late).
	ReorderWindow time.Duration
	// MaxBuffered bounds the lines the reorder buffer holds; when it is
	// full the earliest line is decided at once. Default
	// DefaultMaxBuffered.
	MaxBuffered int
	// Gateways is the fleet the batched limits (sync = "batched") are
	// replayed across: that many gateways with leases of their own on
	// one shared store, requests dealt to them in turn. Default 1.
	Gateways int
}

// Report is the outcome of a replay.
type Report struct {
	// Lines is the number of lines read, blank and malformed included.
	Lines int
	// Requests is the number of well-formed lines replayed.
	Requests int64
	// Malformed is the number of lines skipped as malformed.
	Malformed int
	// First and Last are the earliest and latest timestamps replayed.
	First, Last time.Time
	// Outcomes counts what the gateway did with the replayed requests.
	Outcomes map[proxy.Outcome]int64
	// Limits has one entry per limit of the policy, in configuration
	// order, including limits no request reached.
	Limits []*LimitReport
	// ReorderWindow is the latency the reorder buffer allowed for at the
	// end of the replay (the longest latency in the log, unless set).
	ReorderWindow time.Duration
	// Late is the number of lines that came after a later-starting line
	// had been decided (their latency exceeded the window, or the buffer
	// was full); each was decided at the latest instant decided before it.
	Late int64
	// RLS is what the rate limit service's calls (the log's RLS lines)
	// decided; its Calls is 0 when the log has none. Requests counts
	// the HTTP lines only.
	RLS RLSReport
}

// LimitReport is what one limit decided during a replay.
type LimitReport struct {
	// Name, Algorithm and Shadow describe the limit.
	Name      string
	Algorithm ratelimit.Algorithm
	Shadow    bool
	// Requests is the number of requests the limit decided (exempt
	// clients and unmatched routes skip it).
	Requests int64
	// Allowed and Denied split Requests by the limit's own verdict; for a
	// shadow limit Denied is what it would have denied. A request allowed
	// here may still have been denied by another limit.
	Allowed, Denied int64
	// PeakUsed of PeakLimit is the highest usage any key reached, as the
	// fraction of the reported window's capacity (after the decision).
	PeakUsed, PeakLimit int64
	// Compared reports whether the limit is approximate and was compared
	// with an exact sliding log; FalseAllows and FalseDenies are then the
	// decisions on which the two disagreed, the log being fed the same
	// admitted history (see package accuracy for the method).
	Compared                 bool
	FalseAllows, FalseDenies int64
	// Batched reports whether the limit is batched; BatchFalseAllows and
	// BatchFalseDenies are then the decisions on which the fleet of
	// Gateways differed from the same algorithm decided exactly, fed the
	// same admitted history, and BatchBound the most units the fleet may
	// admit past the exact limit (ARCHITECTURE.md "Hybrid counting").
	Batched                            bool
	Gateways                           int
	BatchFalseAllows, BatchFalseDenies int64
	BatchBound                         int64
}

// Run replays the access log read from log through p and returns what each
// limit decided. Malformed lines are reported to o.Errors and skipped; the
// returned error is non-nil only when reading fails or ctx is cancelled
// (the Report then covers the lines replayed so far).
//
// Each entry becomes a request with the logged method and path, the Host
// of the logged route (when it still exists and names one) and:
//
//   - RemoteAddr: the logged client IP when it is an address; a hashed IP
//     replays as a synthetic address (fd00::/8, unique per hash in its
//     leading bits, so that any ipv6_prefix ≥ 8 + log2(distinct clients)
//     keeps them apart);
//   - the API key header carrying the logged (hashed) API key;
//   - for a client identified by user header, the user header carrying the
//     logged user, sent from the first trusted proxy with the client IP in
//     X-Forwarded-For. Users from a JWT cannot be replayed (the token is
//     not logged) and fall back to the next identity source;
//   - for an entry logged with a consumer, a key that names that consumer
//     of the replayed registry (its plan and rates are the registry's, as
//     a "what if" wants; a consumer missing from it has an unknown key).
//     Logged API keys are hashes, so they are no consumer's key.
func Run(ctx context.Context, p *policy.Policy, log io.Reader, o Options) (*Report, error) {
	if p == nil {
		return nil, errors.New("replay: nil policy")
	}
	if o.MaxReported <= 0 {
		o.MaxReported = DefaultMaxReported
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = p.Store.MemoryMaxKeys
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.Gateways <= 0 {
		o.Gateways = 1
	}
	window, grow := o.ReorderWindow, false
	if window <= 0 {
		d, ok, err := longestLatency(log, o.Format)
		if err != nil {
			return nil, fmt.Errorf("replay: reading the log: %w", err)
		}
		window, grow = d, !ok
	}
	if p.Consumers.Enabled() {
		rp := *p
		rp.Identity = p.Identity.WithDirectory(loggedConsumers{p.Consumers.Registry})
		p = &rp
	}
	order := newReorder(window, grow, o.MaxBuffered)
	rep := &Report{Outcomes: make(map[proxy.Outcome]int64)}
	obs := newObserver(p, rep, o)
	clk := &clock{}
	var store ratelimit.Store = memstore.New(memstore.Options{MaxKeys: o.MaxKeys})
	if obs.batched {
		store = newFleet(store.(*memstore.Store), o.Gateways)
	}
	rr, err := newRLSReplay(p, store, clk.Now, &rep.RLS)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	h, err := proxy.New(p, proxy.Options{
		Store:     store,
		Now:       clk.Now,
		Transport: newStandIn(p),
		Observer:  obs,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	b := newBuilder(p)
	parser := accesslog.NewParser(log, o.Format)
	parser.OnMalformed = func(le accesslog.LineError) {
		if o.Errors != nil && rep.Malformed < o.MaxReported {
			fmt.Fprintf(o.Errors, "line %d: %v\n", le.Line, le.Err)
		}
		rep.Malformed++
	}
	// Parsing, request building and putting lines in time order run on
	// their own goroutine, one batch ahead of the handler.
	batches := make(chan []job, 4)
	free := make(chan []job, 6)
	var readErr error
	go func() {
		defer close(batches)
		batch := make([]job, 0, batchSize)
		emit := func(j job) bool {
			batch = append(batch, j)
			if len(batch) < batchSize {
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			batches <- batch
			select {
			case batch = <-free:
			default:
				batch = make([]job, 0, batchSize)
			}
			return true
		}
		for parser.Next() {
			e := parser.Entry()
			if e.RLS != nil {
				order.push(job{at: e.Time, call: rlsRequest(e.RLS), logged: e.RLS}, e.Latency)
			} else {
				order.push(job{at: e.Time, r: b.request(ctx, e)}, e.Latency)
			}
			for j, ok := order.pop(false); ok; j, ok = order.pop(false) {
				if !emit(j) {
					return
				}
			}
		}
		for j, ok := order.pop(true); ok; j, ok = order.pop(true) {
			if !emit(j) {
				return
			}
		}
		if len(batch) > 0 {
			batches <- batch
		}
		rep.Lines, readErr = parser.Line(), parser.Err()
		rep.ReorderWindow = max(order.window-writeMargin, 0)
	}()
	rec := httptest.NewRecorder()
	last := int64(math.MinInt64) // the latest instant decided, in ticks
	for batch := range batches {
		if ctx.Err() != nil {
			continue // drain: the producer stops at its next batch
		}
		for i := range batch {
			j := &batch[i]
			if rep.Requests+rep.RLS.Calls == 0 || j.at.Before(rep.First) {
				rep.First = j.at
			}
			if j.at.After(rep.Last) {
				rep.Last = j.at
			}
			t := j.at.UnixMicro()
			if t < last {
				// Too late to be put in order: time does not run back.
				rep.Late++
				t = last
			}
			last = t
			clk.now.Store(t)
			obs.now = t
			if j.call != nil {
				rr.decide(ctx, j.at, j.call, j.logged)
				*j = job{}
				continue
			}
			rep.Requests++
			resetRecorder(rec)
			h.ServeHTTP(rec, j.r)
			*j = job{}
		}
		select {
		case free <- batch[:0]:
		default:
		}
	}
	// The producer has finished (batches is closed): its fields are ours.
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if o.Errors != nil && rep.Malformed > o.MaxReported {
		fmt.Fprintf(o.Errors, "... and %d more malformed lines (%d in all)\n", rep.Malformed-o.MaxReported, rep.Malformed)
	}
	if readErr != nil {
		return rep, fmt.Errorf("replay: reading the log: %w", readErr)
	}
	return rep, nil
}

// batchSize is the number of requests handed from the parser to the
// handler at once.
const batchSize = 256

// job is one parsed line ready to be served.
type job struct {
	at  time.Time
	seq int64 // line order, among lines read
	r   *http.Request
	// call is a rate limit service call (r is nil) and logged its line.
	call   *rlpb.RateLimitRequest
	logged *accesslog.RLSCall
}

// resetRecorder readies rec for the next request without reallocating: the
// recorder's own header map is kept and cleared, so that replaying a line
// allocates no new one (Result would copy it).
func resetRecorder(rec *httptest.ResponseRecorder) {
	//lint:ignore SA1019 HeaderMap is reused on purpose, see above.
	clear(rec.HeaderMap)
	rec.Body.Reset()
	//lint:ignore SA1019 HeaderMap is reused on purpose, see above.
	*rec = httptest.ResponseRecorder{HeaderMap: rec.HeaderMap, Body: rec.Body, Code: http.StatusOK}
}

// clock is the virtual clock: the current entry's timestamp in ticks.
type clock struct{ now atomic.Int64 }

// Now returns the clock's instant.
func (c *clock) Now() time.Time { return time.UnixMicro(c.now.Load()) }

// loggedStatus carries a line's logged status to the upstream stand-in
// (standIn, usage.go), so that a limit counting by response counts what
// the upstream answered then.
type loggedStatus struct{}
