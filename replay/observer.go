package replay

import (
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// observer tallies decisions per limit and runs the exact sliding log
// beside every approximate limit. Replay is sequential, so it needs no
// lock: Observe runs on the goroutine that called ServeHTTP.
type observer struct {
	rep    *Report
	now    int64 // the decision instant, in ticks
	limits map[*ratelimit.Limit]*tally
}

// tally is one limit's counters and, for approximate limits, its exact
// shadow: one sliding log per counter key, fed the same admitted history.
type tally struct {
	r     *LimitReport
	exact *ratelimit.Limit // nil when the limit is not compared
	logs  map[string][]ratelimit.LogState
}

func newObserver(p *policy.Policy, rep *Report) *observer {
	o := &observer{rep: rep, limits: make(map[*ratelimit.Limit]*tally, len(p.Limits))}
	for _, l := range p.Limits {
		lr := &LimitReport{Name: l.Name, Algorithm: l.Algorithm, Shadow: l.Shadow}
		rep.Limits = append(rep.Limits, lr)
		t := &tally{r: lr}
		if !l.Algorithm.Exact() {
			ex := &ratelimit.Limit{Name: l.Name, Algorithm: ratelimit.SlidingWindowLog, Rates: l.Rates}
			if err := ex.Finish(); err == nil { // the same rates passed Finish already
				t.exact, t.logs, lr.Compared = ex, make(map[string][]ratelimit.LogState), true
			}
		}
		o.limits[l.Limit] = t
	}
	return o
}

// Observe implements proxy.Observer.
func (o *observer) Observe(ev *proxy.Event) {
	o.rep.Outcomes[ev.Outcome]++
	var e ratelimit.Decision
	for i, h := range ev.Hits {
		t := o.limits[h.Limit]
		if t == nil {
			continue
		}
		d := &ev.Decisions[i]
		r := t.r
		r.Requests++
		if d.Allowed {
			r.Allowed++
		} else {
			r.Denied++
		}
		if used := d.Limit - d.Remaining; d.Limit > 0 && used*r.PeakLimit > r.PeakUsed*d.Limit || r.PeakLimit == 0 {
			r.PeakUsed, r.PeakLimit = used, d.Limit
		}
		if t.exact == nil {
			continue
		}
		logs := t.logs[h.Key]
		if logs == nil {
			logs = make([]ratelimit.LogState, len(t.exact.Rates))
			ratelimit.Init[ratelimit.LogState](t.exact, logs, o.now)
			t.logs[h.Key] = logs
		}
		ratelimit.Check[ratelimit.LogState](t.exact, logs, o.now, h.Cost, &e)
		switch {
		case d.Allowed && !e.Allowed:
			r.FalseAllows++
		case !d.Allowed && e.Allowed:
			r.FalseDenies++
		}
		if d.Counted {
			ratelimit.Take[ratelimit.LogState](t.exact, logs, o.now, h.Cost)
		}
	}
}
