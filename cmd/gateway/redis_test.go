package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

func TestNewRedisClientStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	c, err := newRedisClient(policy.RedisStore{URL: policy.SecretURL("redis://" + srv.Addr + "/0")}, 50*time.Millisecond)
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
			rc := policy.RedisStore{URL: policy.SecretURL(tt.url), Cluster: tt.cluster, SentinelMaster: tt.master,
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

// TestClusterHookNeverRetriesASentCommand: an error after a command was
// sent (EOF, a reset, a read timeout) reaches go-redis as a lostReply,
// which it does not retry (no EOF, no network error inside; a timeout
// still reads as context.DeadlineExceeded for the store's timeout count);
// errors that mean the command did not run pass unchanged.
func TestClusterHookNeverRetriesASentCommand(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	h := clusterHook{cluster: cc}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name     string
		err      error
		lost     bool
		deadline bool
	}{
		{"nil", nil, false, false},
		{"EOF after sending", io.EOF, true, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true, false},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true, false},
		{"read timeout", timeout, true, true},
		{"dial refused (never sent)", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, false},
		{"MOVED (did not run)", replyErr("MOVED 3999 127.0.0.1:6381"), false, false},
		{"CLUSTERDOWN", replyErr("CLUSTERDOWN The cluster is down"), false, false},
		{"context deadline", context.DeadlineExceeded, false, true},
		{"pool timeout (never sent)", redis.ErrPoolTimeout, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.sent(context.Background(), tc.err)
			var lr *lostReply
			if errors.As(got, &lr) != tc.lost {
				t.Fatalf("sent(%v) = %v; lostReply %v, want %v", tc.err, got, !tc.lost, tc.lost)
			}
			if tc.lost && (errors.Is(got, io.EOF) || errors.Is(got, io.ErrUnexpectedEOF) || errors.As(got, new(net.Error)) && !tc.deadline) {
				t.Errorf("lostReply %v still unwraps to a retryable error", got)
			}
			if errors.Is(got, context.DeadlineExceeded) != tc.deadline {
				t.Errorf("sent(%v) = %v; is DeadlineExceeded %v, want %v", tc.err, got, !tc.deadline, tc.deadline)
			}
		})
	}
}

// replyErr is an error reply from Redis, as go-redis reports one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

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
		got := warnEvictionPolicy(context.Background(), client, slog.New(slog.NewTextHandler(&buf, nil)), tc.last)
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
	if got := warnEvictionPolicy(context.Background(), rc, slog.New(slog.NewTextHandler(&buf, nil)), "x"); got != "x" || strings.Contains(buf.String(), "WARN") {
		t.Errorf("a Redis refusing CONFIG: returned %q, log %q; want the last policy and silence", got, buf.String())
	}
}

// TestStoreHealthLogsOnce: a run of failed checks logs once per kind of
// failure (an outage alternating between "unreachable" and "breaker open"
// is one), and once more when decisions work again.
func TestStoreHealthLogsOnce(t *testing.T) {
	var buf bytes.Buffer
	errs := []error{
		errors.New("Redis not reachable: dial tcp: connection refused"),
		redisstore.ErrBreakerOpen,
		errors.New("Redis not reachable: dial tcp: connection refused"),
		nil, nil,
		fmt.Errorf("NOPERM: user tg may not run evalsha: %w", redisstore.ErrRefused),
		fmt.Errorf("NOPERM: user tg may not run evalsha: %w", redisstore.ErrRefused),
	}
	i := 0
	h := &storeHealth{ready: func(context.Context) error { i++; return errs[i-1] }, log: slog.New(slog.NewTextHandler(&buf, nil))}
	for range errs {
		h.check(context.Background())
	}
	if n := strings.Count(buf.String(), "cannot make a decision"); n != 2 {
		t.Errorf("%d failure lines, want 2 (the outage, the refusal); log:\n%s", n, buf.String())
	}
	if n := strings.Count(buf.String(), "makes decisions again"); n != 1 {
		t.Errorf("%d recovery lines, want 1; log:\n%s", n, buf.String())
	}
}
