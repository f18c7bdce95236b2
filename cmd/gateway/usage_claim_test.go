package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisClaimerOwner: on a real Redis, a notice's claim is won by
// its first owner, again by that owner (a retry after a lost answer:
// Redis had set the key), never by another gateway, and expires with
// its ttl.
func TestRedisClaimerOwner(t *testing.T) {
	srv := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := redisClaimer{c}
	for _, step := range []struct {
		owner string
		want  bool
	}{{"gw-a", true}, {"gw-a", true}, {"gw-b", false}, {"gw-a", true}} {
		got, err := cl.Claim(ctx, "p:usage:notice:x", step.owner, time.Hour)
		if err != nil || got != step.want {
			t.Fatalf("claim by %s: %v, %v; want %v", step.owner, got, err, step.want)
		}
	}
	pttl, err := c.PTTL(ctx, "p:usage:notice:x").Result()
	if err != nil || pttl <= 0 || pttl > time.Hour {
		t.Errorf("claim ttl %v, %v; want up to an hour", pttl, err)
	}
}
