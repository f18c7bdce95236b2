package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestLaneServerClosed: the coalescer's lanes hold their connections
// between calls, outside the client's pool, so the pool's check of an
// idle connection never sees them. Connections the server closed while
// a lane held them (CLIENT KILL of every client, a restart on the same
// port) must be found before a call is written to them and replaced, as
// the pool's check would have: not one decision fails, and the lanes
// did find closed connections (LaneRedials), so the check was exercised.
func TestLaneServerClosed(t *testing.T) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: 2 * time.Second, DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 4, BreakerFailures: 1000})
	defer s.Close()
	if err := s.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := finished(t, ratelimit.Limit{Name: "lanes", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	hit := func(int) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: "{lanes}k", Cost: 1}} }
	one := func(what string) {
		t.Helper()
		if _, err := s.Decide(context.Background(), time.Now(), hit(0), make([]ratelimit.Decision, 1)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// Several callers at once take several lanes, each pinning one.
	decideAll(t, s, 8, 400, hit)
	for range 5 {
		if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
			t.Fatal(err)
		}
		one("first decision after CLIENT KILL") // the lane given back last
		decideAll(t, s, 8, 400, hit)            // and the others
	}
	killed := s.Stats().LaneRedials
	if killed == 0 {
		t.Fatal("no lane found its connection closed after CLIENT KILL: the check was not exercised")
	}
	srv.Restart() // empty: the library is loaded again on the way
	one("first decision after a restart")
	decideAll(t, s, 8, 400, hit)
	st := s.Stats()
	if st.LaneRedials == killed {
		t.Fatal("no lane found its connection closed after the restart")
	}
	if st.Timeouts+st.OtherErrors != 0 {
		t.Fatalf("%d timeouts, %d other errors", st.Timeouts, st.OtherErrors)
	}
	t.Logf("%d lane connections found closed and replaced (%d after CLIENT KILL)", st.LaneRedials, killed)
}

// TestLaneConnectionsReleased: the lanes' own connections are given back
// when the lanes go unused for the idle time (a Store dropped without
// Close leaves none behind for long), pinned again on the next calls, and
// given back by Close, after which calls go through the Store's client.
func TestLaneConnectionsReleased(t *testing.T) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: 2 * time.Second, DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 4})
	redisstore.SetWorkerIdle(s, 200*time.Millisecond)
	if err := s.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := finished(t, ratelimit.Limit{Name: "lanes", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	hit := func(int) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: "{lanes}k", Cost: 1}} }
	clients := func() int {
		n, err := strconv.Atoi(srv.Info("clients", "connected_clients"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	decideAll(t, s, 8, 400, hit)
	pinned := clients()
	waitFor(t, 10*time.Second, "idle lanes give their connections back", func() bool { return clients() < pinned })
	idle := clients()
	decideAll(t, s, 8, 400, hit)
	if n := clients(); n <= idle {
		t.Fatalf("%d clients after calls, %d with the lanes idle: the lanes pinned no connection again", n, idle)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "Close gives the lanes' connections back", func() bool { return clients() <= idle })
	if _, err := s.Decide(context.Background(), time.Now(), hit(0), make([]ratelimit.Decision, 1)); err != nil {
		t.Fatalf("a call after Close: %v", err)
	}
}
