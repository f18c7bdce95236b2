package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// commandCalls returns the calls of cmd in srv's INFO commandstats.
func commandCalls(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	v, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(fmt.Sprint(v), "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			var n int
			fmt.Sscan(strings.Split(rest, ",")[0], &n)
			return n
		}
	}
	return 0
}

// TestEngineChoice: on this Redis (7 or later), once the readiness probe
// has settled the engine, decisions run as a Function library (FCALL, no
// EVALSHA); with NoFunctions, or for a user whose ACL refuses FUNCTION,
// they run with EVALSHA; both count alike. Before it is settled, a
// decision runs with EVALSHA and starts the choice in the background.
func TestEngineChoice(t *testing.T) {
	ctx := context.Background()
	l := finished(t, ratelimit.Limit{Name: "engine", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(3, time.Hour)}})
	for _, tc := range []struct {
		name   string
		opts   redisstore.Options
		user   string
		engine string
		cmd    string
	}{
		{"default", redisstore.Options{}, "", "function", "fcall"},
		{"no-functions", redisstore.Options{NoFunctions: true}, "", "script", "evalsha"},
		{"acl-refuses-function", redisstore.Options{}, "nofn", "script", "evalsha"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := engineServer(t, tc.user)
			tc.opts.DenyCacheSize = -1
			s := newStore(t, c, tc.opts)
			if e := s.Stats().Engine; e != "unknown" {
				t.Fatalf("engine %q before any call", e)
			}
			// The readiness probe settles the engine, as the gateway's
			// startup does.
			if err := s.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			out := make([]ratelimit.Decision, 1)
			for i := range 4 {
				ok, err := s.Decide(ctx, time.Now(), []ratelimit.Hit{{Limit: l, Key: "{e}k", Cost: 1}}, out)
				if err != nil || ok != (i < 3) || out[0].Remaining != max(0, 2-int64(i)) {
					t.Fatalf("decision %d: %v %v %+v", i, ok, err, out[0])
				}
			}
			if e := s.Stats().Engine; e != tc.engine {
				t.Fatalf("engine %q, want %q", e, tc.engine)
			}
			if n := commandCalls(t, srv, tc.cmd); n != 5 {
				t.Fatalf("%d calls of %s for the probe and 4 decisions", n, tc.cmd)
			}
			other := map[string]string{"fcall": "evalsha", "evalsha": "fcall"}[tc.cmd]
			if n := commandCalls(t, srv, other); n != 0 {
				t.Fatalf("%d calls of %s", n, other)
			}
		})
	}
}

// TestFunctionFlushUnderLoad: FUNCTION FLUSH while decisions flow costs
// zero errors (Redis answers "Function not found", which proves the call
// did not run: the library is loaded again and the call sent once more)
// and exact counts.
func TestFunctionFlushUnderLoad(t *testing.T) {
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: time.Second, DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "fflush", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	hits := func(int) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: "{fflush}k", Cost: 1}} }
	h := startHammer(s, 4, hits)
	waitFor(t, 5*time.Second, "first calls", func() bool { return h.calls.Load() > 20 })
	for range 20 {
		if _, err := standard.Do("FUNCTION", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.finish()
	if e := h.errs.Load(); e != 0 {
		t.Fatalf("%d errors under FUNCTION FLUSH", e)
	}
	if n := s.Stats().LibraryLoads; n < 2 {
		t.Fatalf("library loaded %d times across 20 flushes", n)
	}
	u, err := s.Usage(context.Background(), time.Now(), l, "{fflush}k")
	if err != nil {
		t.Fatal(err)
	}
	if u[0].Used != h.calls.Load() {
		t.Fatalf("counted %d units for %d allowed calls", u[0].Used, h.calls.Load())
	}
}

// TestEngineSettlesInBackground: without a readiness probe, the first
// decisions run with EVALSHA (a decision's budget does not pay for
// loading the library) and the engine becomes the Function library soon
// after.
func TestEngineSettlesInBackground(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, newClient(t, srv.Addr), redisstore.Options{DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "bg", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(1000, time.Second)}})
	out := make([]ratelimit.Decision, 1)
	decide := func() {
		t.Helper()
		if ok, err := s.Decide(context.Background(), time.Now(), []ratelimit.Hit{{Limit: l, Key: "{bg}k", Cost: 1}}, out); err != nil || !ok {
			t.Fatalf("decision: %v %v", ok, err)
		}
	}
	decide()
	if n := commandCalls(t, srv, "evalsha"); n != 1 {
		t.Fatalf("first decision: %d EVALSHA calls, want 1", n)
	}
	waitFor(t, 5*time.Second, "the engine settles", func() bool { return s.Stats().Engine == "function" })
	decide()
	if n := commandCalls(t, srv, "fcall"); n != 1 {
		t.Fatalf("after the engine settled: %d FCALL calls, want 1", n)
	}
}

// engineServer starts a redis-server with the user "nofn" (password pw),
// refused FUNCTION, and returns it with a client logged in as user ("" is
// the default user).
func engineServer(t *testing.T, user string) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Standalone(t)
	if _, err := srv.Do("ACL", "SETUSER", "nofn", "on", ">pw", "~*", "+@all", "-function"); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: map[string]string{"nofn": "pw"}[user], MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return srv, c
}
