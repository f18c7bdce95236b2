package telemetry

import "github.com/tollgate/gateway/proxy"

// Observers fans one Event out to several observers, in order.
type Observers []proxy.Observer

// Observe implements proxy.Observer.
func (obs Observers) Observe(ev *proxy.Event) {
	for _, o := range obs {
		o.Observe(ev)
	}
}
