package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

func TestNewRedisClientStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	c, err := newRedisClient(policy.RedisStore{URL: config.SecretURL("redis://" + srv.Addr + "/0")}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("client is %T, want *redis.Client", c)
	}
	o := rc.Options()
	if !o.ContextTimeoutEnabled || o.MaxRetries > 0 {
		t.Errorf("ContextTimeoutEnabled=%v MaxRetries=%d; want true, no retries", o.ContextTimeoutEnabled, o.MaxRetries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}

	// A hung server: the call's deadline bounds the socket wait.
	srv.Pause()
	defer srv.Resume()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	start := time.Now()
	err = c.Ping(ctx2).Err()
	if err == nil {
		t.Fatal("PING to a stopped server succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("PING to a hung server took %s; the deadline did not bound the socket", d)
	}
}

func TestNewRedisClientShapes(t *testing.T) {
	tests := []struct {
		name     string
		url      string
		cluster  []string
		master   string
		sentinel []string
		want     string
		wantErr  bool
	}{
		{name: "tls url", url: "rediss://127.0.0.1:6380/1", want: "*redis.Client"},
		{name: "cluster", cluster: []string{"127.0.0.1:7000"}, want: "*redis.ClusterClient"},
		{name: "sentinel", master: "m", sentinel: []string{"127.0.0.1:26379"}, want: "*redis.Client"},
		{name: "bad url", url: "http://x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := policy.RedisStore{URL: config.SecretURL(tt.url), Cluster: tt.cluster, SentinelMaster: tt.master,
				SentinelAddrs: tt.sentinel, Username: "u", Password: "p"}
			c, err := newRedisClient(rc, 0)
			if tt.wantErr {
				if err == nil {
					c.Close()
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := typeName(c); got != tt.want {
				t.Errorf("type %s, want %s", got, tt.want)
			}
			if rc, ok := c.(*redis.Client); ok && tt.url != "" {
				o := rc.Options()
				if o.TLSConfig == nil || o.Username != "u" || o.Password != "p" || o.DB != 1 {
					t.Errorf("rediss options: tls=%v user=%q db=%d", o.TLSConfig != nil, o.Username, o.DB)
				}
			}
		})
	}
}

func typeName(c redis.UniversalClient) string {
	switch c.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	}
	return "other"
}

// TestRedisLogIsStructuredAndThrottled: go-redis's messages, however many
// at once, become one JSON warning with the library's text as detail
// (without its "redis: " prefix); the next one a second later counts the
// ones held back.
func TestRedisLogIsStructuredAndThrottled(t *testing.T) {
	var buf bytes.Buffer
	l := &redisLog{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	for i := range 100 {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 5, i)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines for 100 messages at once, want 1:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %v: %q", err, lines[0])
	}
	want := map[string]any{"level": "WARN", "msg": "redis client", "source": "go-redis",
		"detail": "connection pool: failed to dial after 5 attempts: 0", "suppressed_since_last_line": float64(0)}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, rec[k], v, lines[0])
		}
	}
	// A nil context (a library path passing none) is not a panic.
	var none context.Context
	(&redisLog{log: slog.New(slog.NewJSONHandler(&buf, nil))}).Printf(none, "%s", "x")
}
