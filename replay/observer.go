package replay

import (
	"time"

	"github.com/tollgate/gateway/accuracy"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// observer tallies decisions per limit and runs the exact sliding log
// beside every approximate limit. Replay is sequential, so it needs no
// lock: Observe runs on the goroutine that called ServeHTTP.
type observer struct {
	rep     *Report
	now     int64 // the decision instant, in ticks
	limits  map[*ratelimit.Limit]*tally
	batched bool // some limit is batched
}

// tally is one limit's counters and, for approximate limits, its exact
// shadow: one sliding log per counter key, fed the same admitted history.
type tally struct {
	r     *LimitReport
	exact *accuracy.Referee // nil when the limit is not compared
	logs  map[string]accuracy.Log
	batch *batchJudge // nil when the limit is not batched
}

func newObserver(p *policy.Policy, rep *Report, opts Options) *observer {
	o := &observer{rep: rep, limits: make(map[*ratelimit.Limit]*tally, len(p.Limits))}
	for _, l := range p.Limits {
		lr := &LimitReport{Name: l.Name, Algorithm: l.Algorithm, Shadow: l.Shadow}
		rep.Limits = append(rep.Limits, lr)
		t := &tally{r: lr}
		vs := l.Variants()
		// The referee judges one set of rates; a limit whose plans or
		// consumers count by others is tallied, not compared.
		if !l.Algorithm.Exact() && len(vs) == 1 {
			if ref, err := accuracy.NewReferee(l.Name, l.Rates); err == nil { // the same rates passed Finish already
				t.exact, t.logs, lr.Compared = ref, make(map[string]accuracy.Log), true
			}
		}
		if b := l.Batch; b != nil {
			t.batch, o.batched = newBatchJudge(vs, opts.MaxKeys), true
			lr.Batched, lr.Gateways = true, opts.Gateways
			if l.Algorithm == ratelimit.SlidingWindowCounter {
				lr.BatchBound = int64(opts.Gateways) * (b.Lease - 1)
			}
		}
		for _, v := range vs {
			o.limits[v] = t
		}
	}
	return o
}

// Observe implements proxy.Observer.
func (o *observer) Observe(ev *proxy.Event) {
	o.rep.Outcomes[ev.Outcome]++
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
		if t.batch != nil {
			switch ok := t.batch.judge(time.UnixMicro(o.now), h, d.Counted); {
			case d.Allowed && !ok:
				r.BatchFalseAllows++
			case !d.Allowed && ok:
				r.BatchFalseDenies++
			}
		}
		if t.exact == nil {
			continue
		}
		logs := t.logs[h.Key]
		if logs == nil {
			logs = t.exact.NewLog(o.now)
			t.logs[h.Key] = logs
		}
		switch t.exact.Judge(logs, o.now, h.Cost, d.Allowed, d.Counted) {
		case accuracy.FalseAllow:
			r.FalseAllows++
		case accuracy.FalseDeny:
			r.FalseDenies++
		}
	}
}
