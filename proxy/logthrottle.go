package proxy

import (
	"net/http"
	"time"

	"github.com/tollgate/gateway/internal/logthrottle"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// logThrottle lets one log line through per logthrottle.Every (a second)
// about one thing (one shadow limit, the store's failures): a line per
// request would flood the log under exactly the load that causes it.
type logThrottle = logthrottle.Throttle

// logShadow logs what shadow limits would have denied: at most one line a
// second per limit at info, counting the denials in between (the access
// log, outcome shadow_limited, and the tollgate.decisions metric,
// mode="shadow", record every one).
func (h *Handler) logShadow(snap *snapshot, hits []ratelimit.Hit, ds []ratelimit.Decision, now time.Time) {
	for i := range hits {
		if !hits[i].Limit.Shadow || ds[i].Allowed {
			continue
		}
		t := snap.shadow[hits[i].Limit]
		if t == nil {
			continue
		}
		if n, ok := t.Allow(now); ok {
			h.log.Info("shadow limit would deny", "limit", hits[i].Limit.Name,
				"retry_after", ds[i].RetryAfter.String(), "also_denied_since_last_line", n)
		}
	}
}

// logUpstreamError logs a failed upstream exchange at most once a second,
// with the number of failures since the last line: an upstream that is down,
// or a request a client knows makes it reset, must not write a line per
// request (the access log and the upstream_error outcome count each one).
func (h *Handler) logUpstreamError(r *http.Request, err error) {
	if n, ok := h.upstreamErrLog.Allow(h.now()); ok {
		h.log.Warn("upstream error", "url", r.URL.Redacted(), "err", err, "also_failed_since_last_line", n)
	}
}

// logStoreError logs a store failure at most once a second, with the
// number of failures since the last line: an outage must show in the log
// without a line per request.
func (h *Handler) logStoreError(err error, onError policy.OnError, now time.Time) {
	if n, ok := h.storeErrLog.Allow(now); ok {
		h.log.Warn("rate-limit store failed; store.on_error decides", "on_error", onError.String(), "err", err,
			"also_failed_since_last_line", n)
	}
}
