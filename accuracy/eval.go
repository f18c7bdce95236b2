package accuracy

import (
	"errors"
	"fmt"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// Result is the outcome of replaying one trace through one limit.
//
// How decisions are counted: the algorithm under test (A) and an exact
// sliding log (E) of the same rate L per W run side by side on the same
// arrivals, key by key. E is fed A's admitted history: whenever A allows a
// request, its units are counted in both; when A denies, in neither. For
// each arrival, A's verdict is compared with E's verdict on that shared
// history:
//
//   - a false allow is a request A allowed that E would have denied (it
//     would put more than L units in some interval of length W);
//   - a false deny is a request A denied that E would have allowed.
//
// Feeding E the approximate history (rather than running E on its own) is
// what makes each verdict comparable: it asks "given what has been let
// through so far, was this decision right?", so a single early mistake is
// counted once instead of shifting every later decision.
type Result struct {
	// Trace and Algorithm name the row (Algorithm includes the precision
	// when set, e.g. "sliding_window_counter/1s").
	Trace, Algorithm string
	// Requests is the number of decisions made.
	Requests int64
	// Allowed is how many A allowed.
	Allowed int64
	// FalseAllows and FalseDenies count the disagreements with E.
	FalseAllows, FalseDenies int64
	// WorstExcess is the largest number of units above L that A admitted
	// within any half-open interval of length W, for any key (0 when A
	// never exceeded L).
	WorstExcess int64
}

// Errors returns FalseAllows + FalseDenies.
func (r Result) Errors() int64 { return r.FalseAllows + r.FalseDenies }

// ErrorRate returns the fraction of decisions that were wrong, 0 for an
// empty trace.
func (r Result) ErrorRate() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Errors()) / float64(r.Requests)
}

// Evaluate replays t through l, which must be a Finished limit with exactly
// one rate (any algorithm but concurrency), beside an exact sliding log of
// the same rate fed l's admitted history (see Result). Costs above l's
// capacity are decided (denied, Never) like the stores do, and compared too.
func Evaluate(t *Trace, l *ratelimit.Limit) (Result, error) {
	if l == nil || l.ID == "" {
		return Result{}, errors.New("accuracy: limit must be Finished")
	}
	if l.Algorithm == ratelimit.Concurrency || len(l.Rates) != 1 {
		return Result{}, fmt.Errorf("accuracy: limit %q: want exactly one rate, not concurrency", l.Name)
	}
	exact, err := NewReferee(l.Name, l.Rates)
	if err != nil {
		return Result{}, fmt.Errorf("accuracy: %w", err)
	}
	var r Result
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		r = run[window.FixedWindowState](t, l, exact)
	case ratelimit.FixedWindowElastic:
		r = run[window.ElasticState](t, l, exact)
	case ratelimit.SlidingWindowLog:
		r = run[window.LogState](t, l, exact)
	case ratelimit.SlidingWindowCounter:
		r = run[window.SlidingCounterState](t, l, exact)
	case ratelimit.TokenBucket:
		r = run[window.TokenBucketState](t, l, exact)
	case ratelimit.GCRA:
		r = run[window.GCRAState](t, l, exact)
	default:
		return Result{}, fmt.Errorf("accuracy: unsupported algorithm %s", l.Algorithm)
	}
	r.Trace, r.Algorithm = t.Name, Label(l)
	return r, nil
}

// Label names l's algorithm for a table row: the algorithm, then
// "/precision" for a sliding counter with sub-buckets and "/burst=B" for a
// bucket with an explicit burst.
func Label(l *ratelimit.Limit) string {
	s := l.Algorithm.String()
	if l.Precision > 0 && l.Precision != l.Rates[0].Window {
		s += "/" + l.Precision.String()
	}
	if l.Burst > 0 {
		s += fmt.Sprintf("/burst=%d", l.Burst)
	}
	return s
}

// run is Evaluate for one state type. Keys' states live in slices indexed
// by key and are made fresh (Init) on first use, which is what a store does
// for a key it does not hold or whose state has expired (Expiry is defined
// as the instant the state equals a fresh one).
func run[S any, P window.StatePtr[S]](t *Trace, l *ratelimit.Limit, exact *Referee) Result {
	states := make([]S, t.Keys)
	logs := make([]window.LogState, t.Keys)
	seen := make([]bool, t.Keys)
	limit := l.Rates[0].Limit
	var r Result
	var d ratelimit.Decision
	for _, a := range t.Arrivals {
		k, now, cost := int(a.Key), a.At, int64(a.Cost)
		st, lg := states[k:k+1], logs[k:k+1]
		if !seen[k] {
			window.Init[S, P](l, st, now)
			exact.Start(lg, now)
			seen[k] = true
		}
		window.Check[S, P](l, st, now, cost, &d)
		r.Requests++
		switch exact.Judge(lg, now, cost, d.Allowed, d.Allowed) {
		case FalseAllow:
			r.FalseAllows++
		case FalseDeny:
			r.FalseDenies++
		}
		if !d.Allowed {
			continue
		}
		r.Allowed++
		window.Take[S, P](l, st, now, cost)
		// Take dropped every unit at or before now − W, so the log now
		// holds exactly the units of the window (now − W, now]; the
		// densest window always ends at an admitted arrival.
		r.WorstExcess = max(r.WorstExcess, lg[0].Units()-limit)
	}
	return r
}
