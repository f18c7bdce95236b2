package redisstore

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// WarnEvictionPolicy reads Redis's maxmemory-policy and warns on log when
// it is anything but noeviction: every counter key has a TTL, so the
// volatile-* policies evict counters too, and an evicted counter is a
// limit silently reset. It warns only when the policy differs from last
// (the policy seen at the previous check; "" at startup), and returns the
// policy seen. A Redis that refuses CONFIG (managed services often do) is
// not an error, and stays silent: last is returned.
func WarnEvictionPolicy(ctx context.Context, client redis.UniversalClient, log *slog.Logger, last string) string {
	res, err := client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		log.Debug("cannot read Redis maxmemory-policy", "err", err)
		return last
	}
	policy, ok := res["maxmemory-policy"]
	if !ok {
		return last
	}
	if policy != "noeviction" && policy != last {
		log.Warn("Redis may evict rate-limit counters under memory pressure, resetting limits early; "+
			"set maxmemory-policy noeviction (every counter key has a TTL, so volatile-* policies evict counters too)",
			"maxmemory-policy", policy)
	}
	return policy
}
