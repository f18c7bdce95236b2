package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
)

// DecideInverseRefunds is Decide on a Cluster, without the deny cache,
// refunding every count by its inverse operation even when the key is
// untouched since, so that tests exercise the inverse without concurrent
// traffic.
func (s *Store) DecideInverseRefunds(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	var allowed bool
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		allowed, err = s.decideCluster(ctx, now, hits, out, s.newSlots(hits), true)
		return err
	})
	return allowed, err
}

// CoalescerWorkers returns the coalescer's lane workers alive and ever
// started (0, 0 without coalescing).
func CoalescerWorkers(s *Store) (alive, started int64) {
	if s.coal == nil {
		return 0, 0
	}
	return s.coal.workers.Load(), s.coal.started.Load()
}

// SetWorkerIdle sets how long s's parked lane workers wait for a batch;
// call it before any decision.
func SetWorkerIdle(s *Store, d time.Duration) {
	if s.coal != nil {
		s.coal.idleFor = d
	}
}

// AddLaneHook adds h to the clients of s's coalescer lanes (hooks added
// to the Store's client do not see them), dropping the lanes' present
// connections so that every later call goes through it; call it while s
// is idle.
func AddLaneHook(s *Store, h redis.Hook) {
	if s.coal == nil {
		return
	}
	c := s.coal
	c.mu.Lock()
	c.hooks = append(c.hooks, h)
	closes := c.dropFree()
	c.mu.Unlock()
	for _, f := range closes {
		f()
	}
}

// LibraryName is the name of this version's Function library.
var LibraryName = libraryName
