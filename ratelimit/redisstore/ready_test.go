package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestReadyProvesADecision: Ready answers nil only where a decision can be
// made, and otherwise names the cause and wraps ErrRefused (a refusal) or
// not (an unreachable server); both wrap ratelimit.ErrStore.
func TestReadyProvesADecision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	replica := redistest.Replica(t, standard)
	acl := redistest.Standalone(t)
	if _, err := acl.Do("ACL", "SETUSER", "tg", "on", ">pw", "~*", "+@all", "-evalsha", "-eval", "-function", "-fcall"); err != nil {
		t.Fatal(err)
	}
	// A user without scripts but with functions decides through the
	// Function library; one allowed to load it but not to call it is
	// refused by name.
	if _, err := acl.Do("ACL", "SETUSER", "fn", "on", ">pw", "~*", "+@all", "-evalsha", "-eval"); err != nil {
		t.Fatal(err)
	}
	if _, err := acl.Do("ACL", "SETUSER", "nofcall", "on", ">pw", "~*", "+@all", "-fcall"); err != nil {
		t.Fatal(err)
	}
	renamed := redistest.StandaloneConfig(t, "rename-command EVALSHA \"\"\nrename-command FUNCTION \"\"\n")
	dead := redistest.Standalone(t)
	dead.Stop()
	for _, tc := range []struct {
		name    string
		client  *redis.Client
		cause   string // "" for ready
		refused bool
	}{
		{"master", newClient(t, standard.Addr), "", false},
		{"replica", newClient(t, replica.Addr), "READONLY: the configured Redis is a replica", true},
		{"acl", redis.NewClient(&redis.Options{Addr: acl.Addr, Username: "tg", Password: "pw", MaxRetries: -1}),
			"NOPERM: user tg may not run evalsha", true},
		{"acl-functions-only", redis.NewClient(&redis.Options{Addr: acl.Addr, Username: "fn", Password: "pw", MaxRetries: -1}), "", false},
		{"acl-no-fcall", redis.NewClient(&redis.Options{Addr: acl.Addr, Username: "nofcall", Password: "pw", MaxRetries: -1}),
			"NOPERM: user nofcall may not run fcall", true},
		{"renamed", newClient(t, renamed.Addr), "EVALSHA is renamed or disabled", true},
		{"unreachable", newClient(t, dead.Addr), "Redis not reachable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.client.Close()
			s := newStore(t, tc.client, redisstore.Options{})
			err := s.Ready(ctx)
			if tc.cause == "" {
				if err != nil {
					t.Fatalf("Ready: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.cause) {
				t.Fatalf("Ready: %v, want an error naming %q", err, tc.cause)
			}
			if !errors.Is(err, ratelimit.ErrStore) || errors.Is(err, redisstore.ErrRefused) != tc.refused {
				t.Errorf("Ready: %v: ErrStore %v, ErrRefused %v (want true, %v)", err,
					errors.Is(err, ratelimit.ErrStore), errors.Is(err, redisstore.ErrRefused), tc.refused)
			}
		})
	}
}

// TestReadyLeavesTheBreakerAlone: a successful readiness probe does not
// reset the count of consecutive failed decisions, so probes between
// failing decisions do not keep the breaker from opening.
func TestReadyLeavesTheBreakerAlone(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	// A decision budget no call can meet; Ready is bounded by ctx alone.
	s := newStore(t, c, redisstore.Options{Timeout: time.Nanosecond, BreakerFailures: 3, BreakerCooldown: time.Hour, DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "b", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(10, time.Minute)}})
	for i := range 3 {
		if _, err := s.Decide(ctx, time.Now(), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, make([]ratelimit.Decision, 1)); err == nil {
			t.Fatalf("decision %d within 1ns succeeded", i)
		}
		if i < 2 {
			if err := s.Ready(ctx); err != nil {
				t.Fatalf("Ready after %d failed decisions: %v", i+1, err)
			}
		}
	}
	if st := s.Stats().Breaker; st != redisstore.BreakerOpen {
		t.Fatalf("breaker %s after 3 failed decisions with probes between, want open", st)
	}
	if err := s.Ready(ctx); !errors.Is(err, redisstore.ErrBreakerOpen) {
		t.Fatalf("Ready with the breaker open: %v, want ErrBreakerOpen", err)
	}
}

// TestCanceledCallsLeaveBreaker: a call its caller cancels is no store
// failure: it neither opens the breaker nor, as the half-open probe, keeps
// the next call from probing. The breaker runs on an injected clock.
func TestCanceledCallsLeaveBreaker(t *testing.T) {
	srv := redistest.Standalone(t)
	var now atomic.Int64
	now.Store(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	s := newStore(t, newClient(t, srv.Addr), redisstore.Options{Timeout: 100 * time.Millisecond,
		BreakerFailures: 1, BreakerCooldown: time.Second, Now: clock, DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "c", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(100, time.Minute)}})
	decide := func(ctx context.Context) error {
		_, err := s.Decide(ctx, clock(), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, make([]ratelimit.Decision, 1))
		return err
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := decide(canceled); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if st := s.Stats(); st.Breaker != redisstore.BreakerClosed || st.Canceled != 1 {
		t.Fatalf("after a cancelled call: breaker %s, canceled %d; want closed, 1", st.Breaker, st.Canceled)
	}
	srv.Pause()
	err := decide(context.Background())
	srv.Resume()
	if err == nil || s.Stats().Breaker != redisstore.BreakerOpen {
		t.Fatalf("a call to a hung Redis: %v, breaker %s; want a timeout opening it", err, s.Stats().Breaker)
	}
	now.Add(int64(time.Second))
	if err := decide(canceled); err == nil {
		t.Fatal("a cancelled probe succeeded")
	}
	if st := s.Stats(); st.Breaker != redisstore.BreakerHalfOpen || st.Canceled != 2 {
		t.Fatalf("after a cancelled probe: breaker %s, canceled %d; want half-open, 2", st.Breaker, st.Canceled)
	}
	if err := decide(context.Background()); err != nil {
		t.Fatalf("the next probe: %v, want a decision", err)
	}
	if st := s.Stats().Breaker; st != redisstore.BreakerClosed {
		t.Fatalf("breaker %s after a successful probe, want closed", st)
	}
}
