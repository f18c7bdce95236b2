package rls

import (
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// CallLogger receives every call the service answered (the access log,
// and replay, which compares what it decides with what was logged). It
// runs on the call's path and must not keep the Call or what it points
// to.
type CallLogger interface {
	LogCall(c *Call)
}

// Call is one answered ShouldRateLimit call.
type Call struct {
	// At is the decision instant (the service's clock), Latency the
	// call's time in the service, StoreLatency the store's part of it.
	At                    time.Time
	Latency, StoreLatency time.Duration
	// Request is the call as received.
	Request *rlpb.RateLimitRequest
	// Overall is the answer's overall_code.
	Overall rlpb.RateLimitResponse_Code
	// Codes are the descriptors' outcomes, in request order: "ok",
	// "over_limit", "shadow_over_limit", "unlimited" or "no_limit" (the
	// metric's codes), or, when the store failed, "store_error".
	Codes []string
	// StoreErr is the store's failure, nil when it decided.
	StoreErr error
	byValue  []uint64
}

// ByValue reports whether entry j of descriptor i was matched by its
// value (a key_value or a wildcard the configuration names), not by its
// key alone or not at all: such a value is the operator's text as much
// as the caller's (the access log writes it as it is; other values are
// hashed like a client identity).
func (c *Call) ByValue(i, j int) bool {
	return i >= 0 && i < len(c.byValue) && j >= 0 && j < 64 && c.byValue[i]&(1<<j) != 0
}

// CodeStoreError is a descriptor's code in a Call whose store failed.
const CodeStoreError = "store_error"

// logCall hands one answered call to the call logger.
func (s *Server) logCall(start, now time.Time, req *rlpb.RateLimitRequest, resp *rlpb.RateLimitResponse, sc *scratch, storeLatency time.Duration, err error) {
	n := len(req.GetDescriptors())
	c := Call{At: now, Latency: time.Since(start), StoreLatency: storeLatency, Request: req,
		Overall: resp.GetOverallCode(), Codes: sc.codes[:n], StoreErr: err, byValue: sc.byValue[:n]}
	if err != nil {
		for i := range c.Codes {
			c.Codes[i] = CodeStoreError
		}
	}
	s.opts.CallLog.LogCall(&c)
}
