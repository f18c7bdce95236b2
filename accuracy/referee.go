package accuracy

import (
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// Referee judges an approximate limit's decisions, one key at a time,
// against an exact sliding log of the same rates fed the same admitted
// history (the method of Result). It is the one copy of that judgement:
// Evaluate runs it on synthetic traces, `gateway replay` beside every
// approximate limit of a policy. A Referee holds no per-key state (the
// caller keeps each key's log) and is not safe for concurrent use.
type Referee struct {
	exact ratelimit.Limit
	e     ratelimit.Decision
}

// Verdict is how a decision compares with the exact log's.
type Verdict uint8

// Verdicts.
const (
	// Agree: both allowed or both denied.
	Agree Verdict = iota
	// FalseAllow: allowed, where the exact log would have denied.
	FalseAllow
	// FalseDeny: denied, where the exact log would have allowed.
	FalseDeny
)

// Log is one key's exact sliding log, one state per rate of the
// Referee that made it (NewLog). Its state is the Referee's business: a
// caller only keeps it per key and hands it back to Judge.
type Log []window.LogState

// NewReferee returns a Referee for limits of the given rates.
func NewReferee(name string, rates []ratelimit.Rate) (*Referee, error) {
	r := &Referee{exact: ratelimit.Limit{Name: name + "-exact", Algorithm: ratelimit.SlidingWindowLog, Rates: rates}}
	if err := r.exact.Finish(); err != nil {
		return nil, err
	}
	return r, nil
}

// NewLog returns a fresh exact log for a key first seen at now: one state
// per rate.
func (r *Referee) NewLog(now int64) Log {
	log := make(Log, len(r.exact.Rates))
	r.Start(log, now)
	return log
}

// Start makes log (one state per rate) a fresh exact log at now.
func (r *Referee) Start(log Log, now int64) {
	window.Init[window.LogState](&r.exact, log, now)
}

// Judge compares the approximate limit's verdict (allowed) on a request
// of cost units at now with the exact log's verdict on the key's history,
// then, when the approximate limit counted the request, counts it in the
// log too.
func (r *Referee) Judge(log Log, now, cost int64, allowed, counted bool) Verdict {
	window.Check[window.LogState](&r.exact, log, now, cost, &r.e)
	v := Agree
	switch {
	case allowed && !r.e.Allowed:
		v = FalseAllow
	case !allowed && r.e.Allowed:
		v = FalseDeny
	}
	if counted {
		window.Take[window.LogState](&r.exact, log, now, cost)
	}
	return v
}
