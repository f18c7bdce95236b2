package proxy

import (
	"context"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// release gives back the concurrency slots of an allowed request. It uses
// a fresh context: the request's own may already be cancelled.
func (h *Handler) release(hits []ratelimit.Hit) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.store.Release(ctx, hits); err != nil {
		h.log.Warn("releasing concurrency slots failed", "err", err)
		if h.local != nil && h.local != h.store {
			_ = h.local.Release(ctx, hits)
		}
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
