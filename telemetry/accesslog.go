package telemetry

import (
	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/proxy"
)

// AccessLog is a proxy.Observer that writes one access-log line per
// request, in the format `gateway replay` reads.
type AccessLog struct {
	// W receives the lines; it hashes identities as it was configured to.
	W *accesslog.Writer
}

// Observe implements proxy.Observer.
func (a AccessLog) Observe(ev *proxy.Event) {
	decision, limit, _ := summarize(ev)
	outcome := ev.Outcome.String()
	if ev.Outcome == proxy.OutcomeForwarded && shadowDenied(ev) {
		outcome = OutcomeShadowLimited
	}
	var ip string
	if ev.IP.IsValid() {
		ip = ev.IP.String()
	}
	e := accesslog.Entry{
		Time:       ev.Start,
		Client:     ev.Client,
		ClientKind: ev.ClientKind,
		APIKey:     ev.APIKey,
		IP:         ip,
		Method:     ev.Method,
		Path:       ev.Path,
		Proto:      ev.Proto,
		Status:     ev.Status,
		Bytes:      ev.Bytes,
		Referer:    ev.Referer,
		UserAgent:  ev.UserAgent,
		Route:      ev.Route,
		Outcome:    outcome,
		Decision:   decision,
		Limit:      limit,
		Latency:    ev.Duration,
		Consumer:   ev.Consumer,
		Plan:       ev.Plan,
		RequestID:  ev.RequestID,
		Units:      units(ev),
	}
	a.W.Log(&e)
}

// units lists what each limit finally counted, when the event knows it
// only after the answer (Event.Counted): a token budget's usage, a
// response-counted limit's units. nil otherwise, as for most requests.
func units(ev *proxy.Event) []accesslog.Units {
	if ev.Counted == nil {
		return nil
	}
	out := make([]accesslog.Units, 0, len(ev.Counted))
	for i, n := range ev.Counted {
		if i < len(ev.Hits) && ev.Hits[i].Limit != nil {
			out = append(out, accesslog.Units{Limit: ev.Hits[i].Limit.Name, N: n})
		}
	}
	return out
}

// shadowDenied reports whether a shadow limit would have denied ev.
func shadowDenied(ev *proxy.Event) bool {
	for i := range min(len(ev.Hits), len(ev.Decisions)) {
		if l := ev.Hits[i].Limit; l != nil && l.Shadow && !ev.Decisions[i].Allowed {
			return true
		}
	}
	return false
}
