package proxy

import (
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// shadowLogEvery is the least time between two log lines about one shadow
// limit.
const shadowLogEvery = time.Second

// shadowLog rate-limits the log lines of one shadow limit.
type shadowLog struct {
	last       atomic.Int64 // unix nanoseconds of the last line
	suppressed atomic.Int64 // denials not logged since
}

// logShadow logs what shadow limits would have denied: at most one line a
// second per limit at info, counting the denials in between (the access
// log, outcome shadow_limited, and the tollgate.decisions metric,
// mode="shadow", record every one). A line per request would flood the log
// under exactly the load a shadow limit is tried on.
func (h *Handler) logShadow(snap *snapshot, hits []ratelimit.Hit, ds []ratelimit.Decision, now time.Time) {
	for i := range hits {
		if !hits[i].Limit.Shadow || ds[i].Allowed {
			continue
		}
		sl := snap.shadow[hits[i].Limit]
		if sl == nil {
			continue
		}
		last := sl.last.Load()
		if now.UnixNano()-last < int64(shadowLogEvery) || !sl.last.CompareAndSwap(last, now.UnixNano()) {
			sl.suppressed.Add(1)
			continue
		}
		h.log.Info("shadow limit would deny", "limit", hits[i].Limit.Name,
			"retry_after", ds[i].RetryAfter.String(), "also_denied_since_last_line", sl.suppressed.Swap(0))
	}
}

// logStoreError logs a store failure at most once a second, with the
// number of failures since the last line: an outage must show in the log
// without a line per request.
func (h *Handler) logStoreError(err error, onError policy.OnError, now time.Time) {
	last := h.storeErrLog.last.Load()
	if now.UnixNano()-last < int64(time.Second) || !h.storeErrLog.last.CompareAndSwap(last, now.UnixNano()) {
		h.storeErrLog.suppressed.Add(1)
		return
	}
	h.log.Warn("rate-limit store failed; store.on_error decides", "on_error", onError.String(), "err", err,
		"also_failed_since_last_line", h.storeErrLog.suppressed.Swap(0))
}
