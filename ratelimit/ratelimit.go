// Package ratelimit is the contract of Tollgate's rate limiting: rates,
// limit definitions, hits, decisions, and the Store interface that every
// counter backend implements. The algorithms' window states and the math
// that applies them live in package window, which only stores use.
//
// The package knows nothing of HTTP and imports only the standard library.
// Time is always a parameter: stores take "now" as a time.Time and the
// math works in ticks (see Tick).
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"
)

// Tick is the unit of time in which every algorithm computes: one
// microsecond. Instants are ticks since the Unix epoch (time.Time.UnixMicro),
// durations are tick counts. The Redis store uses the same unit so that both
// stores make bit-identical decisions.
const Tick = time.Microsecond

// MaxLimit is the largest limit, burst, cost or max_in_flight accepted: 2^53,
// the largest integer every store (including Lua's doubles) holds exactly.
const MaxLimit = int64(1) << 53

// MaxWindow is the longest window accepted (366 days), so that window
// arithmetic in ticks never overflows even when multiplied by small factors.
const MaxWindow = 366 * 24 * time.Hour

// MaxWait is the longest wait a Decision reports (RetryAfter, Reset): a
// hundred of the longest windows, about a century. A hit that no wait up
// to it would admit is denied with RetryAfter MaxWait, so every search for
// the next admitting instant stops there: only a bucket whose refill takes
// longer (a burst above a hundred times its rate's limit) or a corrupted
// state can need more, and neither then holds a lock while it searches.
// In ticks it is below 2^53, so the Redis scripts' doubles hold it exactly.
const MaxWait = 100 * MaxWindow

// Algorithm names one rate-limiting algorithm. The zero value is invalid.
type Algorithm uint8

// The algorithms; ARCHITECTURE.md "Algorithm math" defines each.
const (
	// FixedWindow allows at most L units per aligned window floor(now/W).
	FixedWindow Algorithm = iota + 1
	// FixedWindowElastic is a fixed window whose end moves to now+W on every
	// allowed hit: a penalty box for clients that keep hammering.
	FixedWindowElastic
	// SlidingWindowLog is exact: never more than L units in any half-open
	// interval of length W. State: at most L timestamps.
	SlidingWindowLog
	// SlidingWindowCounter weighs the previous window (or the oldest
	// sub-bucket when Precision < W) by its overlap with the sliding window.
	SlidingWindowCounter
	// TokenBucket refills L tokens per W up to Burst.
	TokenBucket
	// GCRA is the generic cell rate algorithm: token-bucket behaviour with
	// Burst, one timestamp of state.
	GCRA
	// Concurrency allows at most MaxInFlight units in flight at once.
	Concurrency
	// Quota allows at most L units per calendar period (day, ISO week or
	// month) of the limit's Location: a fixed window whose boundaries are
	// local midnights, so its periods last 23 to 25 hours across DST
	// changes and 28 to 31 days for months.
	Quota
	// Distinct allows at most L distinct values (Hit.Value) per key in a
	// sliding window of sub-windows: exact below DistinctExact values,
	// a HyperLogLog estimate above (distinct.go).
	Distinct
)

var algorithmNames = [...]string{
	FixedWindow:          "fixed_window",
	FixedWindowElastic:   "fixed_window_elastic",
	SlidingWindowLog:     "sliding_window_log",
	SlidingWindowCounter: "sliding_window_counter",
	TokenBucket:          "token_bucket",
	GCRA:                 "gcra",
	Concurrency:          "concurrency",
	Quota:                "quota",
	Distinct:             "distinct",
}

// String returns the configuration name of a, e.g. "sliding_window_log".
func (a Algorithm) String() string {
	if a == 0 || int(a) >= len(algorithmNames) {
		return "Algorithm(" + strconv.Itoa(int(a)) + ")"
	}
	return algorithmNames[a]
}

// ParseAlgorithm maps a configuration name to its Algorithm.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a, name := range algorithmNames {
		if a != 0 && name == s {
			return Algorithm(a), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q", s)
}

// Algorithms lists every algorithm, in the order the README lists them.
func Algorithms() []Algorithm {
	return []Algorithm{FixedWindow, FixedWindowElastic, SlidingWindowLog,
		SlidingWindowCounter, TokenBucket, GCRA, Concurrency, Quota, Distinct}
}

// Exact reports whether a is exact (its decisions follow its definition to
// the tick) rather than an approximation of a sliding window.
func (a Algorithm) Exact() bool { return a != SlidingWindowCounter && a != Distinct }

// Limit is one compiled, immutable limit definition. Limits are shared by
// every request that uses them and must not be modified after compilation.
type Limit struct {
	// Name is the configured name, used in headers, metrics and logs.
	Name string
	// Algorithm decides how the windows are counted.
	Algorithm Algorithm
	// Rates are the windows, all enforced. Empty for Concurrency. Finish
	// sorts them into their canonical order, shortest window first (by
	// count among equal windows), so that the order a configuration lists
	// them in changes neither ID nor the state's layout: window i of a
	// state, Decision.Window and Usage all index the sorted rates.
	Rates []Rate
	// Burst is the bucket capacity for TokenBucket and GCRA; 0 means the
	// rate's limit. Only valid with a single rate.
	Burst int64
	// Precision is the sub-bucket width for SlidingWindowCounter; 0 means
	// the window itself (the classic two-counter estimate). W must be a
	// multiple of it.
	Precision time.Duration
	// MaxInFlight is the Concurrency capacity.
	MaxInFlight int64
	// MaxDelay, when positive, makes a TokenBucket or GCRA limit with one
	// rate delay instead of deny: a hit that would be admitted within
	// MaxDelay reserves its slot now (see Decision.Delay). It is not part
	// of ID: the state is the same.
	MaxDelay time.Duration
	// Shadow marks a limit that counts and reports but never denies.
	Shadow bool
	// Location is the zone whose calendar a Quota limit's periods follow;
	// nil means UTC. Only Quota accepts it.
	Location *time.Location
	// MonthStartsOn is the day of the month, 1..28, on which a Quota
	// limit's monthly periods begin (a billing day); 0 means 1. Only
	// Quota accepts it.
	MonthStartsOn int
	// Penalty, when positive, is how long a key stays denied by this limit
	// after the limit denied one of its requests (other than for a cost
	// above its capacity, which no wait would help): every request of the
	// key is then denied by it, and counted nowhere, until the penalty
	// ends (requests denied meanwhile do not extend it). 0 means none. Not
	// for Concurrency (whose denials say more about others' requests in
	// flight than about the client) nor for a shadow limit (which never
	// denies).
	Penalty time.Duration
	// Scope is what else tells this limit's counters apart from another
	// limit's with the same name (the gateway puts the key parts there).
	// It is part of ID and is not interpreted otherwise.
	Scope string
	// Batch, when set, lets a hybrid store decide this limit's hits from
	// leases (see Batch). It is not part of ID: switching a limit between
	// exact and batched keeps its counters.
	Batch *Batch
	// ID identifies the limit's counters: its name, algorithm, mode,
	// Scope and the shape of its state (the window lengths, in canonical
	// order, and, for SlidingWindowCounter, the precision), but not the
	// order rates are listed in, nor its counts, burst or
	// max_in_flight. A reload that changes only those keeps the ID, so
	// the usage counted so far carries over and is judged by the new
	// numbers, instead of every client starting from zero. Two limits
	// with one ID always have states of one layout. Set by Finish.
	ID string

	// params caches Params(i) for every window; set by Finish so that the
	// hot path passes a pointer to it without allocating.
	params []Params
	// penaltyBox is the limit that holds the penalty of this one's keys
	// (see PenaltyBox); set by Finish when Penalty is positive.
	penaltyBox *Limit
	// isBox marks a limit that is another one's penalty box (see
	// IsPenaltyBox).
	isBox bool
}

// Finish validates l and computes its ID. It must be called once after the
// fields are set and before the limit is used.
func (l *Limit) Finish() error {
	if err := l.Validate(); err != nil {
		return err
	}
	// Both slices are made afresh: the caller's Rates, or those of the
	// limit l was copied from, must keep their order and their params.
	l.Rates = sortedRates(l.Rates)
	l.params = make([]Params, 0, l.Windows())
	for i := range l.Windows() {
		l.params = append(l.params, l.Params(i))
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%q|%s|%t|%q|%d", l.Name, l.Algorithm, l.Shadow, l.Scope, l.Windows())
	for _, p := range l.params {
		// Window and precision fix the layout of a window's state (the
		// sliding counter's buckets) and what its stored instants mean;
		// the counts only judge it.
		fmt.Fprintf(h, "|%d/%d", p.Window, p.Precision)
	}
	if l.Algorithm == Quota {
		// The zone and the billing day decide where periods begin, so
		// counts made under others belong to other periods.
		fmt.Fprintf(h, "|%s|%d", l.location(), l.monthStartsOn())
		for _, r := range l.Rates {
			fmt.Fprintf(h, "/%s", periodOf(r))
		}
	}
	l.ID = strconv.FormatUint(h.Sum64(), 36)
	l.penaltyBox = nil
	if l.Penalty > 0 {
		l.penaltyBox = newPenaltyBox(l)
	}
	return nil
}

// Validate reports the first problem with l's definition.
func (l *Limit) Validate() error {
	if l.Algorithm == 0 || int(l.Algorithm) >= len(algorithmNames) {
		return fmt.Errorf("unknown algorithm %d", l.Algorithm)
	}
	if err := l.validateDelay(); err != nil {
		return err
	}
	if l.Algorithm == Concurrency {
		if len(l.Rates) != 0 {
			return errors.New("concurrency takes max_in_flight, not rates")
		}
		if l.MaxInFlight <= 0 || l.MaxInFlight > MaxLimit {
			return fmt.Errorf("max_in_flight must be in 1..2^53, got %d", l.MaxInFlight)
		}
		if l.Penalty != 0 {
			return errors.New("penalty does not apply to the concurrency algorithm (its denials depend on other requests in flight)")
		}
		if l.Location != nil || l.MonthStartsOn != 0 {
			return errors.New("timezone and month_starts_on apply only to the quota algorithm")
		}
		return nil
	}
	if l.MaxInFlight != 0 {
		return errors.New("max_in_flight applies only to the concurrency algorithm")
	}
	if err := l.validateCalendar(); err != nil {
		return err
	}
	if err := l.validatePenalty(); err != nil {
		return err
	}
	if len(l.Rates) == 0 {
		return errors.New("at least one rate is required")
	}
	for _, r := range l.Rates {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	if l.Burst != 0 {
		if l.Algorithm != TokenBucket && l.Algorithm != GCRA {
			return errors.New("burst applies only to token_bucket and gcra")
		}
		if len(l.Rates) != 1 {
			return errors.New("burst requires exactly one rate")
		}
		if l.Burst < 0 || l.Burst > MaxLimit {
			return fmt.Errorf("burst must be in 1..2^53, got %d", l.Burst)
		}
	}
	if l.Algorithm == Distinct {
		if err := l.validateDistinct(); err != nil {
			return err
		}
	}
	if l.Precision != 0 && l.Algorithm != Distinct {
		if l.Algorithm != SlidingWindowCounter {
			return errors.New("precision applies only to sliding_window_counter")
		}
		if l.Precision < 0 || l.Precision%Tick != 0 {
			return fmt.Errorf("precision must be a positive whole number of microseconds, got %s", l.Precision)
		}
		for _, r := range l.Rates {
			if r.Window%l.Precision != 0 {
				return fmt.Errorf("precision %s does not divide window %s", l.Precision, r.Window)
			}
			if r.Window/l.Precision > 3600 {
				return fmt.Errorf("precision %s splits window %s into more than 3600 buckets", l.Precision, r.Window)
			}
		}
	}
	if err := l.checkBatch(); err != nil {
		return err
	}
	return l.checkStateBytes()
}

// Capacity returns the most units one request may ever be granted by the
// window at index i: the burst for bucket algorithms, the limit otherwise,
// MaxInFlight for Concurrency (i ignored).
func (l *Limit) Capacity(i int) int64 {
	switch {
	case l.Algorithm == Concurrency:
		return l.MaxInFlight
	case (l.Algorithm == TokenBucket || l.Algorithm == GCRA) && l.Burst > 0:
		return l.Burst
	default:
		return l.Rates[i].Limit
	}
}

// Hit is one limit applied to one request.
type Hit struct {
	// Limit is the definition; it must have been Finished.
	Limit *Limit
	// Key identifies the counter within the limit: an opaque, already-hashed
	// string built by the caller. If it contains a Redis hash tag "{...}",
	// stores that shard by key keep every key with the same tag together.
	Key string
	// Cost is the number of units the request needs, ≥ 1.
	Cost int64
	// Mode says how the store treats the hit; the zero value counts it
	// like any hit.
	Mode HitMode
	// Value is, for a Distinct limit, the 64-bit hash of the value whose
	// distinct count the limit bounds (an IP, a user name, a path): the
	// caller hashes it, so a store never sees the raw value. Ignored by
	// the other algorithms.
	Value uint64
}

// Check reports why a store cannot decide h: a nil or unfinished limit, or
// a cost below 1. Stores call it on every hit; it is a caller's bug, not a
// store failure.
func (h Hit) Check() error {
	switch {
	case h.Limit == nil:
		return errors.New("nil limit")
	case h.Limit.ID == "":
		return fmt.Errorf("limit %q not finished (empty ID)", h.Limit.Name)
	case h.Cost < 1:
		return fmt.Errorf("cost %d < 1", h.Cost)
	}
	return nil
}

// Decision is the outcome of one Hit.
type Decision struct {
	// Allowed reports whether this hit's limit would admit the request.
	// For a shadow limit it is what the limit would have decided.
	Allowed bool
	// Counted reports whether the hit consumed units (the request as a whole
	// was allowed and, for a shadow limit, the limit itself allowed it).
	Counted bool
	// Window is the index in Limit.Rates of the window reported: the
	// denying window with the longest RetryAfter, or, when allowed, the
	// window with the lowest remaining fraction.
	Window int
	// Limit is the capacity of the reported window (L, or the burst).
	Limit int64
	// Remaining is how many units that window has left after this decision.
	Remaining int64
	// Reset is how long until Remaining next increases if nothing else
	// happens (0 when the window is full), at most MaxWait. Never longer
	// than RetryAfter for a denied hit.
	Reset time.Duration
	// RetryAfter is, for a denied hit, the earliest wait after which the
	// same request (same cost) would be allowed by this limit if nothing
	// else happened, at most MaxWait (a hit no wait up to MaxWait admits
	// reports MaxWait). 0 when allowed, when unknown (Concurrency), or
	// when Never is set.
	RetryAfter time.Duration
	// Never is set when the cost exceeds the capacity: no wait helps.
	Never bool
	// Penalty is set when the limit's penalty box decided the hit: the
	// key was in it (the hit denied, RetryAfter the time left, nothing
	// checked or counted), or this denial put it there (RetryAfter then
	// at least the penalty). See Limit.Penalty.
	Penalty bool
	// Lease identifies the units a counted Concurrency hit holds, for
	// Release: a non-zero id of the slot (Redis, whose slots carry their
	// own leases) or of the counter it was counted on (memory), so that a
	// release never gives back units to a counter reset since. 0 for other
	// hits.
	Lease uint64
	// Delay is, for a hit of a limit with MaxDelay allowed by waiting, how
	// long the request must wait for its slot (0: admitted now); the slot
	// is reserved only when the hit is Counted.
	Delay time.Duration
	// Mark identifies a delayed hit's reservation for Canceler.Cancel: the
	// state's time mark the reservation wrote (the bucket's instant for
	// TokenBucket, the theoretical arrival time for GCRA, in ticks).
	Mark float64
	// At is, when the store decided on a clock of its own rather than at
	// the now passed to Decide (Redis TIME), the instant it decided at, in
	// ticks since the Unix epoch on that clock: a counted hit's units are
	// in the window or bucket of At, which is where Returner.Return finds
	// them. 0 when the store decided at the caller's now. A hybrid
	// store's hit admitted from a lease reports the instant the lease was
	// counted at (where its units are, for ratelimit.Settler).
	At int64
}

// Store decides hits against counters it owns. Implementations must be safe
// for concurrent use.
type Store interface {
	// Decide decides every hit of one request at once and writes one
	// Decision per hit into out (len(out) ≥ len(hits)). The request is
	// allowed only if every non-shadow hit allows it; only then are hits
	// counted — enforced hits all, shadow hits only where their own limit
	// allowed. A denied request changes no counter. now is the caller's
	// clock; a store configured to use its own clock ignores it.
	// err is non-nil only when the store failed; being limited is not an
	// error.
	Decide(ctx context.Context, now time.Time, hits []Hit, out []Decision) (allowed bool, err error)
	// Release gives back the units that an allowed request holds on its
	// Concurrency hits: ds are the decisions Decide wrote for hits, and
	// only hits with ds[i].Counted are given back (a shadow limit that
	// denied counted nothing); other hits are ignored. Call it exactly once
	// per allowed request that had Concurrency hits, on the store whose
	// Decide counted them. A store that fails to reach its backend may keep
	// the release and retry it (see the store's documentation) while it
	// returns the error.
	Release(ctx context.Context, hits []Hit, ds []Decision) error
	// Usage reports the current state of every window of limit for key
	// without changing it.
	Usage(ctx context.Context, now time.Time, limit *Limit, key string) ([]WindowUsage, error)
	// Reset deletes the counters of limit for key.
	Reset(ctx context.Context, limit *Limit, key string) error
	// Close releases the store's resources.
	Close() error
}

// WindowUsage is the state of one window of one key, as the admin API
// reports it.
type WindowUsage struct {
	// Rate is the window's rate (zero for Concurrency).
	Rate Rate
	// Used is the number of units counted in the window now (for the
	// sliding counter, the weighted estimate rounded up).
	Used int64
	// Remaining is the capacity left.
	Remaining int64
	// Reset is how long until Remaining next increases.
	Reset time.Duration
}

// ErrStore wraps every error a Store returns for a failing backend, so that
// callers can tell store failures from their own bugs with errors.Is.
var ErrStore = errors.New("rate-limit store failure")
