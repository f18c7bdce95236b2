package policy

import (
	"net/http"

	"github.com/tollgate/gateway/costscan"
	"github.com/tollgate/gateway/policy/config"
)

// Usage is how a limit counts by the usage an upstream reports in its
// answer's body (a token budget): cost_response_json, and, with
// cost_request_json, the estimate reserved before forwarding and settled
// after the answer.
type Usage struct {
	// Body is the path of the usage in the response body (a JSON
	// document, or the last event of a text/event-stream that carries
	// it); zero when the usage comes from CostHeader.
	Body costscan.Path
	// ScanBytes bounds the response body read for Body.
	ScanBytes int64
	// Estimate is the path of the estimate in the request's JSON body;
	// zero when the limit does not reserve (it peeks before forwarding
	// and takes the usage after, as count = "response" does).
	Estimate costscan.Path
	// EstimateBytes bounds the request body read (and held) for Estimate.
	EstimateBytes int64
	// OnMissing is what an answer without usage counts.
	OnMissing OnMissingUsage
}

// Reserves reports whether the limit reserves an estimate.
func (u *Usage) Reserves() bool { return u != nil && !u.Estimate.IsZero() }

// OnMissingUsage is a limit's on_missing_usage setting.
type OnMissingUsage uint8

// The on_missing_usage values.
const (
	// MissingEstimate counts the estimate (the reservation stays), or
	// the request's cost for a limit that does not reserve.
	MissingEstimate OnMissingUsage = iota
	// MissingZero counts nothing (a reservation is given back).
	MissingZero
	// MissingCost counts the request's cost (cost, cost_header).
	MissingCost
)

// defaultUsageStatuses are the statuses that count when a token budget
// lists none: an upstream error (5xx) settles to zero.
var defaultUsageStatuses = []StatusRange{{100, 499}}

// compileUsage compiles cost_response_json, cost_request_json,
// on_missing_usage, cost_scan_bytes and cost_request_bytes of c into l,
// after compileResponse.
func compileUsage(l *Limit, c *config.LimitConfig, path string, e *problems) {
	if c.CostResponseJSON == "" && c.CostRequestJSON == "" {
		if c.OnMissingUsage != "estimate" && c.OnMissingUsage != "" {
			e.add(path+".on_missing_usage", "applies only with cost_response_json or cost_request_json")
		}
		return
	}
	if l.Response == nil {
		for _, k := range []struct{ name, v string }{{"cost_response_json", c.CostResponseJSON}, {"cost_request_json", c.CostRequestJSON}} {
			if k.v != "" {
				e.add(path+"."+k.name, "applies only with count = \"response\"")
			}
		}
		return
	}
	u := &Usage{ScanBytes: c.CostScanBytes, EstimateBytes: c.CostRequestBytes}
	if c.CostResponseJSON != "" {
		p, err := costscan.ParsePath(c.CostResponseJSON)
		if err != nil {
			e.add(path+".cost_response_json", "%v", err)
		}
		u.Body = p
		if l.Response.CostHeader != "" {
			e.add(path+".cost_response_json", "use one of cost_response_header and cost_response_json")
		}
	}
	if c.CostRequestJSON != "" {
		p, err := costscan.ParsePath(c.CostRequestJSON)
		if err != nil {
			e.add(path+".cost_request_json", "%v", err)
		}
		u.Estimate = p
		if c.CostResponseJSON == "" && l.Response.CostHeader == "" {
			e.add(path+".cost_request_json", "needs the usage to settle to: cost_response_json or cost_response_header")
		}
		if alg := l.Limit.Algorithm; alg != 0 && !alg.Settleable() {
			e.add(path+".cost_request_json", "a reservation cannot be settled on %s", alg)
		}
	}
	switch c.OnMissingUsage {
	case "estimate", "":
		u.OnMissing = MissingEstimate
	case "zero":
		u.OnMissing = MissingZero
	case "cost":
		u.OnMissing = MissingCost
	default:
		e.add(path+".on_missing_usage", "unknown value %q (want estimate, zero or cost)", c.OnMissingUsage)
	}
	if c.CostScanBytes < 1 || c.CostScanBytes > 1<<40 {
		e.add(path+".cost_scan_bytes", "must be in 1..1099511627776, got %d", c.CostScanBytes)
	}
	if c.CostRequestBytes < 1 || c.CostRequestBytes > 64<<20 {
		e.add(path+".cost_request_bytes", "must be in 1..67108864, got %d", c.CostRequestBytes)
	}
	if len(c.CountStatuses) == 0 {
		l.Response.Statuses = defaultUsageStatuses
	}
	l.Response.Usage = u
}

// UsageCap returns the most units one answer counts under l: the largest
// capacity of its windows (a usage or an estimate can exhaust a window,
// not lock a client out for many windows).
func (l *Limit) UsageCap() int64 {
	var most int64
	for i := range l.Windows() {
		most = max(most, l.Capacity(i))
	}
	return most
}

// ResponseHeaderCost reads the usage of a reserving limit whose usage is
// in CostHeader: ok is false when the header is absent or malformed
// (then on_missing_usage decides).
func (l *Limit) ResponseHeaderCost(h http.Header) (cost int64, ok bool) {
	vs := h[l.Response.CostHeader]
	if len(vs) != 1 {
		return 0, false
	}
	n, good := parseCost(vs[0])
	if !good {
		return 0, false
	}
	return min(n, l.UsageCap()), true
}
