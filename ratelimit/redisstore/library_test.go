package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestLibraryScriptsEngine: the Store's other scripts (a concurrency
// slot's renewal and release, the override table's put and delete, a
// lease's give-back) run on
// the engine the decisions run on: functions of the library (FCALL, no
// EVALSHA or EVAL) on Redis 7, EVALSHA with NoFunctions or for a user
// whose ACL refuses FUNCTION; each does its job on both. After FUNCTION
// FLUSH (SCRIPT FLUSH) just before it, each is called again once the
// library is loaded back (with EVAL), with no error: Redis's "Function
// not found" (NOSCRIPT) proves the call did not run.
func TestLibraryScriptsEngine(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		opts       redisstore.Options
		user       string
		cmd, other string
	}{
		{"default", redisstore.Options{}, "", "fcall", "evalsha"},
		{"no-functions", redisstore.Options{NoFunctions: true}, "", "evalsha", "fcall"},
		{"acl-refuses-function", redisstore.Options{}, "nofn", "evalsha", "fcall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := engineServer(t, tc.user)
			tc.opts.DenyCacheSize = -1
			tc.opts.LeaseTTL = 400 * time.Millisecond // renewals every ~130 ms
			s := newStore(t, c, tc.opts)
			defer s.Close()
			if err := s.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			// flush makes Redis forget the code, in the second round,
			// before each script is called.
			flush := func(round int) {
				if round == 0 {
					return
				}
				if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
					t.Fatal(err)
				}
				if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil && tc.user == "" {
					t.Fatal(err)
				}
			}
			for round := range 2 {
				h := ratelimit.Hit{Limit: concLimit(t, 1), Key: "{lib}k", Cost: 1}
				d := acquire(t, s, h)
				flush(round)
				renewed := s.Stats().LeaseRenewals
				waitFor(t, 5*time.Second, "a renewal", func() bool { return s.Stats().LeaseRenewals > renewed })
				flush(round)
				if err := s.Release(ctx, []ratelimit.Hit{h}, d); err != nil {
					t.Fatalf("round %d: Release: %v", round, err)
				}
				if n := used(t, s, h); n != 0 || s.Stats().LeasesLost != 0 {
					t.Fatalf("round %d: %d units in flight after the release, %+v", round, n, s.Stats())
				}
				o := ratelimit.Override{Limit: "l", Subject: "s", Rates: []ratelimit.Rate{rate(5, time.Minute)},
					Expires: time.Now().Add(time.Hour), Created: time.Now()}
				flush(round)
				if err := s.PutOverride(ctx, time.Now(), o, 10); err != nil {
					t.Fatalf("round %d: PutOverride: %v", round, err)
				}
				if _, list, err := s.Overrides(ctx, 0); err != nil || len(list) != 1 {
					t.Fatalf("round %d: Overrides: %v %v", round, list, err)
				}
				flush(round)
				if ok, err := s.DeleteOverride(ctx, "l", "s"); err != nil || !ok {
					t.Fatalf("round %d: DeleteOverride: %v %v", round, ok, err)
				}
				// A give-back (the decide script's mode 3).
				fw := ratelimit.Hit{Limit: finished(t, ratelimit.Limit{Name: "lib-fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(5, time.Hour)}}), Key: "{lib}fw", Cost: 2}
				now := time.Now()
				if ok, err := s.Decide(ctx, now, []ratelimit.Hit{fw}, make([]ratelimit.Decision, 1)); err != nil || !ok {
					t.Fatalf("round %d: Decide: %v %v", round, ok, err)
				}
				flush(round)
				if err := s.Return(ctx, now, []ratelimit.Hit{fw}, []time.Time{now}); err != nil {
					t.Fatalf("round %d: Return: %v", round, err)
				}
				if n := used(t, s, fw); n != 0 {
					t.Fatalf("round %d: %d units counted after the give-back", round, n)
				}
			}
			if n := commandCalls(t, srv, tc.other); n != 0 {
				t.Fatalf("%d calls of %s", n, tc.other)
			}
			if tc.cmd == "fcall" {
				if n := commandCalls(t, srv, "eval"); n != 0 {
					t.Fatalf("%d EVAL calls on the function engine", n)
				}
				if n := s.Stats().LibraryLoads; n < 6 {
					t.Fatalf("library loaded %d times: once, then once after each of 5 flushes expected", n)
				}
			}
		})
	}
}
