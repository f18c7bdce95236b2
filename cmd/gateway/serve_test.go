package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
)

func TestWarnEvictionPolicy(t *testing.T) {
	srv := redistest.Standalone(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	for _, tc := range []struct {
		policy string
		warn   bool
	}{
		{"noeviction", false},
		{"volatile-lru", false},
		{"allkeys-lru", true},
		{"allkeys-random", true},
	} {
		if _, err := srv.Do("CONFIG", "SET", "maxmemory-policy", tc.policy); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		warnEvictionPolicy(context.Background(), client, slog.New(slog.NewTextHandler(&buf, nil)))
		if got := strings.Contains(buf.String(), "may evict"); got != tc.warn {
			t.Errorf("maxmemory-policy %s: warned=%v, want %v; log: %s", tc.policy, got, tc.warn, buf.String())
		}
	}
}

func TestMonotonicClockIgnoresNothingButAdvances(t *testing.T) {
	now := monotonicClock()
	a := now()
	time.Sleep(2 * time.Millisecond)
	b := now()
	if !b.After(a) {
		t.Fatalf("clock did not advance: %v then %v", a, b)
	}
	if d := time.Since(a); d < 0 || d > time.Minute {
		t.Fatalf("clock is not near the wall clock: %v", d)
	}
}
