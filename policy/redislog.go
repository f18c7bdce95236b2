package policy

import (
	"fmt"

	"github.com/tollgate/gateway/ratelimit"
)

// maxRedisLogUnits bounds a sliding_window_log on the Redis store: the
// sum of its rates' limits, the most entries one key's logs can hold (an
// entry per tick that counted, at least one unit each). Redis decodes a
// key's whole log and, when it admits, encodes it again on every call,
// while every other client of that Redis waits: about a microsecond per
// entry, so 1,000 entries keep a call near a millisecond, where the
// general bound on a key's state (ratelimit.MaxStateBytes, 64 MiB, about
// 4 million entries) let one call take tens of seconds (BENCHMARKS.md
// "sliding_window_log on Redis: time per call by log length"). The memory
// store walks only the entries a decision drops or needs, and keeps the
// general bound.
const maxRedisLogUnits = 1000

// checkRedisLog reports a sliding_window_log definition v (l's own, a
// plan's or a consumer's variant, an override) whose logs could hold more
// than maxRedisLogUnits entries a key on the Redis store; "" when it
// cannot, or when the store is not Redis.
func (l *Limit) checkRedisLog(v *ratelimit.Limit) string {
	if !l.redisLog {
		return ""
	}
	return redisLogProblem(v)
}

// redisLogProblem is checkRedisLog for a definition known to count on the
// Redis store (a limit's, or a rule of the rate limit service's).
func redisLogProblem(v *ratelimit.Limit) string {
	if v == nil || v.Algorithm != ratelimit.SlidingWindowLog {
		return ""
	}
	var units int64
	for _, r := range v.Rates {
		units += r.Limit
	}
	if units <= maxRedisLogUnits {
		return ""
	}
	return fmt.Sprintf("on the Redis store a sliding_window_log is decoded whole on every call, so its limits may add up to at most %d (entries per key), got %d; lower the limit, or use sliding_window_counter, which costs the same at any limit",
		maxRedisLogUnits, units)
}
