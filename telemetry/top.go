package telemetry

import (
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/topk"
)

// Top is a proxy.Observer that feeds every decision to a topk.Tracker:
// per-limit decision counts for the dashboard, and the clients denied or
// near their limit for /admin/top. No client identity ever becomes a
// metric label.
type Top struct {
	T *topk.Tracker
}

// Observe implements proxy.Observer.
func (o Top) Observe(ev *proxy.Event) {
	for i := range min(len(ev.Hits), len(ev.Decisions)) {
		l, d := ev.Hits[i].Limit, &ev.Decisions[i]
		if l == nil {
			continue
		}
		used := int64(-1)
		if d.Limit > 0 {
			// In float: a limit near the int64 range would overflow.
			used = int64(float64(min(max(d.Limit-d.Remaining, 0), d.Limit)) * 1000 / float64(d.Limit))
		}
		o.T.Record(o.T.Limit(l.Name), ev.Start, ev.ClientKind, ev.Client, !d.Allowed, l.Shadow, d.Allowed && nearLimit(d), used)
	}
	if ev.StoreLatency > 0 || ev.StoreErr != nil {
		o.T.Store.Add(ev.Start, ev.StoreLatency, ev.StoreErr != nil)
	}
}
