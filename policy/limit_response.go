package policy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// ResponseCount is how a limit with count = "response" counts: a request
// is checked before it is forwarded (counting nothing) and counted after
// the upstream's answer, when its status is one of Statuses (every status
// when empty), by the units in CostHeader when the upstream sends it.
type ResponseCount struct {
	// Statuses are the inclusive ranges of statuses that count; empty
	// means every status.
	Statuses []StatusRange
	// CostHeader is the canonical name of the response header carrying
	// the units to count; "" means the request's cost.
	CostHeader string
	// Usage, when non-nil, reads the units from the response body
	// (cost_response_json) or reserves an estimate before forwarding
	// (cost_request_json); see limit_usage.go.
	Usage *Usage
}

// StatusRange is an inclusive range of HTTP statuses.
type StatusRange struct{ Lo, Hi int }

// Counts reports whether a response with status counts.
func (r *ResponseCount) Counts(status int) bool {
	if len(r.Statuses) == 0 {
		return true
	}
	for _, s := range r.Statuses {
		if status >= s.Lo && status <= s.Hi {
			return true
		}
	}
	return false
}

// ResponseCost returns the units a response with headers h counts under
// l: the value of the response cost header when the upstream sends one
// well-formed value (one field of ASCII digits naming 1..2^53, as for the
// request's cost header), capped at the largest capacity of l's windows (a
// response can exhaust a window, not lock a client out for many windows);
// otherwise reqCost, the cost the request was checked with. ok is false
// when a header was sent but malformed (the caller may log it).
func (l *Limit) ResponseCost(h http.Header, reqCost int64) (cost int64, ok bool) {
	if l.Response == nil || l.Response.CostHeader == "" {
		return reqCost, true
	}
	vs := h[l.Response.CostHeader]
	if len(vs) == 0 {
		return reqCost, true
	}
	n, good := parseCost(vs[0])
	if len(vs) > 1 || !good {
		return reqCost, false
	}
	var most int64
	for i := range l.Windows() {
		most = max(most, l.Capacity(i))
	}
	return min(n, most), true
}

// parseStatuses parses count_statuses: codes "401" or ranges "500-599",
// each within 100..599.
func parseStatuses(vals []string, path string, e *problems) []StatusRange {
	var out []StatusRange
	for i, v := range vals {
		lo, hi, isRange := strings.Cut(v, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		switch {
		case err1 != nil || err2 != nil || strings.ContainsAny(v, "+ ") || lo == "" || (isRange && hi == ""):
			e.add(fmt.Sprintf("%s[%d]", path, i), "invalid status %q (want a code like \"401\" or a range like \"500-599\")", v)
		case a < 100 || b > 599 || a > b:
			e.add(fmt.Sprintf("%s[%d]", path, i), "status range %q must lie within 100..599, low to high", v)
		default:
			out = append(out, StatusRange{a, b})
		}
	}
	return out
}

// waitShareDivisor divides a delay limit's max_waiting into the share
// one counter key may hold: max(1, max_waiting / 8).
const waitShareDivisor = 8

// waitShare returns the waiters one key of a delay limit keyed by by may
// hold: all of maxWaiting when every client has the same key (nothing
// but route in by), else max(1, maxWaiting / waitShareDivisor).
func waitShare(maxWaiting int, by []keys.Part) int {
	for _, p := range by {
		if p.Kind != keys.PartRoute {
			return max(1, maxWaiting/waitShareDivisor)
		}
	}
	return maxWaiting
}

// compileResponse compiles count, count_statuses, cost_response_header,
// on_limit, max_delay and max_waiting of c into l.
func compileResponse(l *Limit, c *config.LimitConfig, path string, e *problems) {
	alg := l.Limit.Algorithm
	switch c.Count {
	case "request", "":
		if len(c.CountStatuses) > 0 {
			e.add(path+".count_statuses", "applies only with count = \"response\"")
		}
		if c.CostResponseHeader != "" {
			e.add(path+".cost_response_header", "applies only with count = \"response\"")
		}
	case "response":
		if alg != 0 && !alg.Takeable() {
			e.add(path+".count", "count = \"response\" does not apply to %s: its units are held while a request runs, not taken", alg)
		}
		r := &ResponseCount{Statuses: parseStatuses(c.CountStatuses, path+".count_statuses", e)}
		if c.CostResponseHeader != "" {
			if !validHeaderName(c.CostResponseHeader) {
				e.add(path+".cost_response_header", "invalid header name %q", c.CostResponseHeader)
			}
			r.CostHeader = canonicalHeader(c.CostResponseHeader)
		}
		l.Response = r
	default:
		e.add(path+".count", "unknown value %q (want request or response)", c.Count)
	}
	switch c.OnLimit {
	case "reject", "":
		if c.MaxDelay != "" {
			e.add(path+".max_delay", "applies only with on_limit = \"delay\"")
		}
	case "delay":
		n := len(*e)
		switch {
		case alg != 0 && !alg.Delayable():
			e.add(path+".on_limit", "delay applies only to token_bucket and gcra, not %s", alg)
		case len(c.Rates) > 1:
			e.add(path+".on_limit", "delay needs exactly one rate, got %d", len(c.Rates))
		case c.Mode == "shadow":
			e.add(path+".on_limit", "delay cannot be used with mode = \"shadow\": a shadow limit never delays a request")
		case l.Response != nil:
			e.add(path+".on_limit", "delay cannot be used with count = \"response\"")
		}
		if c.MaxDelay == "" {
			e.add(path+".max_delay", "is required with on_limit = \"delay\"")
		} else if d := duration(c.MaxDelay, path+".max_delay", true, e); d > 0 {
			if d > ratelimit.MaxWindow || d%ratelimit.Tick != 0 {
				e.add(path+".max_delay", "must be a whole number of microseconds up to 366 days, got %s", c.MaxDelay)
			} else if len(*e) == n {
				l.Limit.MaxDelay = d
			}
		}
		if c.MaxWaiting < 1 || c.MaxWaiting > 1<<20 {
			e.add(path+".max_waiting", "must be in 1..1048576, got %d", c.MaxWaiting)
		}
		l.MaxWaiting = c.MaxWaiting
		l.WaitShare = waitShare(c.MaxWaiting, l.By)
	default:
		e.add(path+".on_limit", "unknown value %q (want reject or delay)", c.OnLimit)
	}
}
