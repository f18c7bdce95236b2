package redisstore

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The end of old Function libraries. Each gateway version loads its own
// library, tollgate_<digest> (source.go), and nothing else would ever
// delete it: after a few upgrades a Redis holds every version's code. So
// each gateway that runs on the library records, in one hash shared by
// every gateway on the server (LibrariesKey, field: library name, value:
// Redis TIME in µs), that its library is in use: when it loads it and
// every LibraryCheck after. On the same schedule it deletes the
// tollgate_<digest> libraries (on every master of a Cluster) whose last
// recorded use is more than LibraryGrace ago; a library it sees without a
// record is recorded as in use then (a gateway of a version before the
// records, still running), and deleted a grace later unless used.
//
// Deleting is always safe, even of a library still in use (a record
// lost, a version from before the records running for longer than the
// grace): a gateway whose function is gone gets "Function not found",
// which proves the call did not run, loads its library again and calls
// once more (engine.go). Such a gateway pays one reload per grace.

// LibrariesKey is the hash recording when each library was last in use.
// It is not under Options.Prefix: libraries belong to the server, not to
// a prefix, and gateways with other prefixes run the same ones. A user
// whose ACL may not write it leaves every library in place.
const LibrariesKey = "tollgate-libraries"

const (
	// LibraryGrace is how long a library unused (unrecorded) stays loaded.
	LibraryGrace = 24 * time.Hour
	// LibraryCheck is how often a gateway records its use and looks for
	// libraries past their grace: well within the grace, so a running
	// gateway's library is never past it.
	LibraryCheck = time.Hour
)

// ourLibrary matches the names of the libraries gateways load; no other
// library is ever deleted.
var ourLibrary = regexp.MustCompile(`^tollgate_[0-9a-f]{16}$`)

// retirer is the Store's state of the check loop.
type retirer struct {
	start sync.Once
	mu    sync.Mutex // serialises the checks
	stop  chan struct{}
	done  chan struct{}
}

// startRetire starts the check loop once: it checks now, then every
// LibraryCheck, until Close.
func (s *Store) startRetire() {
	s.retire.start.Do(func() {
		s.retire.stop, s.retire.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.retire.done)
			t := time.NewTicker(LibraryCheck)
			defer t.Stop()
			for {
				ctx, cancel := s.background()
				s.RetireLibraries(ctx)
				cancel()
				select {
				case <-s.retire.stop:
					return
				case <-t.C:
				}
			}
		}()
	})
}

// closeRetire stops the check loop, if it runs.
func (s *Store) closeRetire() {
	s.retire.start.Do(func() {}) // never started: it never will
	if s.retire.stop == nil {
		return
	}
	s.retire.mu.Lock()
	select {
	case <-s.retire.stop:
	default:
		close(s.retire.stop)
	}
	s.retire.mu.Unlock()
	<-s.retire.done
}

// RetireLibraries records that this Store's library is in use and deletes
// the libraries of other gateway versions unused for LibraryGrace, as
// described above, returning the names deleted. It does nothing (nil, nil)
// unless the Store runs on the library. The Store calls it by itself
// (when the engine is chosen and every LibraryCheck); it is exported for
// an operator's tool and tests.
func (s *Store) RetireLibraries(ctx context.Context) ([]string, error) {
	if engine(s.engine.v.Load()) != engineFunction {
		return nil, nil
	}
	s.retire.mu.Lock()
	defer s.retire.mu.Unlock()
	tm, err := s.client.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	now := tm.UnixMicro()
	if err := s.client.HSet(ctx, LibrariesKey, libraryName, now).Err(); err != nil {
		return nil, err
	}
	// Like every key the gateway writes, it ends if no gateway touches
	// it: after two graces none runs on the library anyway, and a lost
	// record only delays a deletion by a grace.
	if err := s.client.PExpire(ctx, LibrariesKey, 2*LibraryGrace).Err(); err != nil {
		return nil, err
	}
	loaded, err := s.libraries(ctx)
	if err != nil {
		return nil, err
	}
	uses, err := s.client.HGetAll(ctx, LibrariesKey).Result()
	if err != nil {
		return nil, err
	}
	var gone []string
	for name := range loaded {
		if name == libraryName {
			continue
		}
		v, ok := uses[name]
		last, perr := strconv.ParseInt(v, 10, 64)
		if !ok || perr != nil {
			// First seen (or a record written by hand): in use from now.
			if err := s.client.HSet(ctx, LibrariesKey, name, now).Err(); err != nil {
				return gone, err
			}
			continue
		}
		if now-last < LibraryGrace.Microseconds() {
			continue
		}
		if err := s.deleteLibrary(ctx, name); err != nil {
			return gone, err
		}
		gone = append(gone, name)
		s.stats.librariesRetired.Add(1)
		delete(loaded, name) // its record goes below
	}
	// Records of libraries no longer loaded anywhere (deleted above, or
	// by hand, or flushed): the hash holds one field per live library.
	for name := range uses {
		if _, ok := loaded[name]; !ok && name != libraryName {
			if err := s.client.HDel(ctx, LibrariesKey, name).Err(); err != nil {
				return gone, err
			}
		}
	}
	return gone, nil
}

// libraries returns the names of the gateways' libraries loaded on the
// server (on any master of a Cluster).
func (s *Store) libraries(ctx context.Context) (map[string]bool, error) {
	var mu sync.Mutex
	names := map[string]bool{}
	list := func(ctx context.Context, c redis.Cmdable) error {
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "tollgate_*"}).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, l := range libs {
			if ourLibrary.MatchString(l.Name) {
				names[l.Name] = true
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return list(ctx, c) })
	} else {
		err = list(ctx, s.client)
	}
	return names, err
}

// deleteLibrary deletes library name (from every master of a Cluster); a
// server that does not hold it is fine.
func (s *Store) deleteLibrary(ctx context.Context, name string) error {
	del := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionDelete(ctx, name).Err()
		var rerr redis.Error
		if errors.As(err, &rerr) && strings.Contains(strings.ToLower(err.Error()), "library not found") {
			return nil
		}
		return err
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	}
	return del(ctx, s.client)
}
