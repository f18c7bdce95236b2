package redisstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestWarnEvictionPolicy: every policy but noeviction warns, naming the
// policy found and noeviction; a policy already warned about at the last
// check does not warn again; a Redis that refuses CONFIG stays silent.
func TestWarnEvictionPolicy(t *testing.T) {
	srv := redistest.Standalone(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	for _, tc := range []struct {
		policy, last string
		warn         bool
	}{
		{"noeviction", "", false},
		{"volatile-lru", "", true},
		{"volatile-ttl", "", true},
		{"allkeys-lru", "", true},
		{"allkeys-random", "noeviction", true},
		{"volatile-lfu", "volatile-lfu", false},
	} {
		if _, err := srv.Do("CONFIG", "SET", "maxmemory-policy", tc.policy); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		got := redisstore.WarnEvictionPolicy(context.Background(), client, slog.New(slog.NewTextHandler(&buf, nil)), tc.last)
		warned := strings.Contains(buf.String(), "may evict")
		if warned != tc.warn || got != tc.policy {
			t.Errorf("maxmemory-policy %s (last %q): warned=%v returned %q, want %v and %q; log: %s",
				tc.policy, tc.last, warned, got, tc.warn, tc.policy, buf.String())
		}
		if warned && (!strings.Contains(buf.String(), tc.policy) || !strings.Contains(buf.String(), "noeviction")) {
			t.Errorf("maxmemory-policy %s: the warning names neither the policy nor noeviction: %s", tc.policy, buf.String())
		}
	}
	refusing := redistest.StandaloneConfig(t, "rename-command CONFIG \"\"\nmaxmemory-policy allkeys-lru\n")
	rc := redis.NewClient(&redis.Options{Addr: refusing.Addr})
	defer rc.Close()
	var buf bytes.Buffer
	if got := redisstore.WarnEvictionPolicy(context.Background(), rc, slog.New(slog.NewTextHandler(&buf, nil)), "x"); got != "x" || strings.Contains(buf.String(), "WARN") {
		t.Errorf("a Redis refusing CONFIG: returned %q, log %q; want the last policy and silence", got, buf.String())
	}
}
