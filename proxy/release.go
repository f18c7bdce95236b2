package proxy

import (
	"context"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// release gives back the concurrency units that q's decision counted, on
// the store that counted them (the local fallback's slots stay local: given
// back on the shared store they would free another gateway's units), once
// and only for the hits that counted (a shadow limit that would have denied
// counted nothing). It uses a fresh context: the request's own may already
// be cancelled. A store that cannot reach its backend keeps the release
// and retries it itself; the units are never given back to another store.
func (h *Handler) release(q *request) {
	if q.decider == nil || len(q.hits) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := q.decider.Release(ctx, q.hits, q.ds); err != nil {
		h.log.Warn("releasing concurrency slots failed", "err", err)
	}
}

func hasConcurrency(hits []ratelimit.Hit) bool {
	for i := range hits {
		if hits[i].Limit.Algorithm == ratelimit.Concurrency {
			return true
		}
	}
	return false
}
