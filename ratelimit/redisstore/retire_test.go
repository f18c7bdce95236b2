package redisstore_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

const oldLibrary = "tollgate_0123456789abcdef" // another gateway version's

// libSource is a library named name with one function.
func libSource(name string) string {
	return "#!lua name=" + name + "\nredis.register_function('" + name + "_f', function() return 1 end)\n"
}

// libraryNames returns the libraries loaded on c (every master of a
// Cluster, each name once per master).
func libraryNames(t *testing.T, c redis.UniversalClient) []string {
	t.Helper()
	var names []string
	var mu sync.Mutex // a cluster client lists the masters at once
	list := func(ctx context.Context, c *redis.Client) error {
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
		mu.Lock()
		defer mu.Unlock()
		for _, l := range libs {
			names = append(names, l.Name)
		}
		return err
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(context.Background(), list)
	} else {
		err = list(context.Background(), c.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestRetireLibraries: a gateway deletes another version's library once
// its last recorded use is a grace old (on every master of a Cluster),
// records one it sees unrecorded as in use from then (a version from
// before the records may still run it), and never touches its own
// library, one still in use, or a library not named like a gateway's.
func TestRetireLibraries(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return newClient(t, redistest.Standalone(t).Addr) }},
		// A cluster of its own: the library record is one key per server
		// (not under a store's prefix), and the other tests' stores on
		// the shared cluster record and retire libraries in the
		// background, which once retired the old library between this
		// test's record and its check.
		{"cluster", func(t *testing.T) redis.UniversalClient { return newClusterClient(t, redistest.Cluster(t).Addrs()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client(t)
			masters := 1
			load := func(src string) {
				t.Helper()
				f := func(ctx context.Context, c *redis.Client) error { return c.FunctionLoadReplace(ctx, src).Err() }
				var err error
				if cc, ok := c.(*redis.ClusterClient); ok {
					var n atomic.Int32
					err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { n.Add(1); return f(ctx, m) })
					masters = int(n.Load())
				} else {
					err = f(ctx, c.(*redis.Client))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			foreign := []string{"mylib", "tollgate_notadigest", "tollgate_0123456789abcdeg"}
			for _, n := range append([]string{oldLibrary}, foreign...) {
				load(libSource(n))
			}
			t.Cleanup(func() { c.Del(context.Background(), redisstore.LibrariesKey) })
			c.Del(ctx, redisstore.LibrariesKey)
			s := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
			defer s.Close()
			if err := s.Ready(ctx); err != nil { // settles the engine: the library
				t.Fatal(err)
			}
			check := func(want ...string) {
				t.Helper()
				gone, err := s.RetireLibraries(ctx)
				if err != nil || !slices.Equal(gone, want) {
					t.Fatalf("retired %v (%v), want %v", gone, err, want)
				}
			}
			check()
			uses, err := c.HGetAll(ctx, redisstore.LibrariesKey).Result()
			if err != nil || len(uses) != 2 || uses[redisstore.LibraryName] == "" || uses[oldLibrary] == "" {
				t.Fatalf("records %v (%v), want this version's and the old one's", uses, err)
			}
			// Used 23 hours ago: within the grace. Our own, 30 hours ago:
			// ours is never retired (and its record is refreshed).
			ago := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(-d).UnixMicro(), 10) }
			c.HSet(ctx, redisstore.LibrariesKey, oldLibrary, ago(23*time.Hour), redisstore.LibraryName, ago(30*time.Hour),
				"tollgate_fedcba9876543210", ago(time.Minute)) // a record of a library loaded nowhere
			check()
			c.HSet(ctx, redisstore.LibrariesKey, oldLibrary, ago(redisstore.LibraryGrace+time.Minute))
			check(oldLibrary)
			want := append(slices.Clone(foreign), redisstore.LibraryName)
			var wantAll []string
			for _, n := range want {
				for range masters {
					wantAll = append(wantAll, n)
				}
			}
			slices.Sort(wantAll)
			if got := libraryNames(t, c); !slices.Equal(got, wantAll) {
				t.Fatalf("libraries left %v, want %v", got, wantAll)
			}
			uses, _ = c.HGetAll(ctx, redisstore.LibrariesKey).Result()
			if len(uses) != 1 || uses[redisstore.LibraryName] == ago(30*time.Hour) {
				t.Fatalf("records %v, want only this version's, refreshed", uses)
			}
			if st := s.Stats(); st.LibrariesRetired != 1 {
				t.Fatalf("LibrariesRetired %d", st.LibrariesRetired)
			}
		})
	}
}

// TestRetiredWhileInUse: deleting the library of a gateway that is
// deciding (what another version's gateway does to a library whose use
// was not recorded for a grace) costs it no error and no count: Redis
// answers "Function not found", which proves the call did not run, and
// the gateway loads its library again.
func TestRetiredWhileInUse(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, newClient(t, srv.Addr), redisstore.Options{Timeout: time.Second, DenyCacheSize: -1})
	if err := s.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := finished(t, ratelimit.Limit{Name: "retired", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	h := startHammer(s, 4, func(int) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: "{r}k", Cost: 1}} })
	waitFor(t, 5*time.Second, "first calls", func() bool { return h.calls.Load() > 20 })
	for deleted := 0; deleted < 10; {
		// Each deletion waits for the calls in flight to load the
		// library again (on a loaded machine 10 ms could pass without a
		// call, and a DELETE then found nothing to delete); one that
		// still finds it gone waits for the reload and deletes again.
		loads := s.Stats().LibraryLoads
		if _, err := srv.Do("FUNCTION", "DELETE", redisstore.LibraryName); err != nil {
			if !strings.Contains(err.Error(), "Library not found") {
				t.Fatal(err)
			}
		} else {
			deleted++
		}
		waitFor(t, 5*time.Second, "the library loaded again", func() bool { return s.Stats().LibraryLoads > loads })
	}
	h.finish()
	if e := h.errs.Load(); e != 0 {
		t.Fatalf("%d errors while the library was deleted under load", e)
	}
	if n := s.Stats().LibraryLoads; n < 2 {
		t.Fatalf("library loaded %d times across 10 deletions", n)
	}
	u, err := s.Usage(context.Background(), time.Now(), l, "{r}k")
	if err != nil || u[0].Used != h.calls.Load() {
		t.Fatalf("counted %v (%v) for %d allowed calls", u, err, h.calls.Load())
	}
}

// TestRetireLibrariesNoPermission: a gateway whose ACL user may not write
// the record of uses (its keys are limited to its prefix) deletes
// nothing, however old the records say a library is, and decides as
// before.
func TestRetireLibrariesNoPermission(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "scoped", "on", ">pw", "~tg:*", "+@all"},
		{"FUNCTION", "LOAD", libSource(oldLibrary)},
		{"HSET", redisstore.LibrariesKey, oldLibrary, "1"}, // used in 1970
	} {
		if _, err := srv.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "scoped", Password: "pw", MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.Options{Prefix: "tg:", DenyCacheSize: -1})
	defer s.Close()
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if gone, err := s.RetireLibraries(ctx); err == nil || len(gone) != 0 {
		t.Fatalf("retired %v (%v), want a permission error and nothing deleted", gone, err)
	}
	v, err := srv.Do("FUNCTION", "LIST", "LIBRARYNAME", oldLibrary)
	if err != nil || len(v.([]any)) != 1 {
		t.Fatalf("the old library is gone: %v %v", v, err)
	}
	l := finished(t, ratelimit.Limit{Name: "scoped", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(10, time.Second)}})
	if ok, err := s.Decide(ctx, time.Now(), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, make([]ratelimit.Decision, 1)); err != nil || !ok {
		t.Fatalf("decision: %v %v", ok, err)
	}
}
