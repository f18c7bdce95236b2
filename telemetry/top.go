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
		o.T.Record(o.T.Limit(l.Name), ev.Start, ev.ClientKind, ev.Client, !d.Allowed, l.Shadow, d.Allowed && nearLimit(d))
	}
}
