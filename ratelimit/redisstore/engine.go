package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// engine is how the decide script runs on Redis.
type engine uint32

const (
	// engineUnknown: not chosen yet (no call has reached Redis).
	engineUnknown engine = iota
	// engineFunction: the Function library (Redis >= 7), loaded once with
	// FUNCTION LOAD and called with FCALL. Loading runs the chunk once, so
	// the handler tables and helpers exist before any call; a call pays
	// only its own work.
	engineFunction
	// engineScript: EVALSHA, and EVAL when Redis answers NOSCRIPT, which
	// runs the whole chunk on every call: Redis before 7, or an ACL user
	// allowed EVALSHA but not FUNCTION LOAD.
	engineScript
)

// String names the engine as Stats and logs show it.
func (e engine) String() string {
	switch e {
	case engineFunction:
		return "function"
	case engineScript:
		return "script"
	}
	return "unknown"
}

// engineState is the Store's choice of engine, made when Redis first
// answers FUNCTION LOAD (the gateway's startup readiness probe asks) and
// kept for the Store's life.
type engineState struct {
	v    atomic.Uint32
	mu   sync.Mutex  // serialises the choice
	busy atomic.Bool // a choice runs in the background
}

// caller is what run needs of a client: *redis.Client and
// *redis.ClusterClient (and their pipelines) are callers.
type caller interface {
	redis.Scripter
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// fcall issues FCALL of the library's decide with keys and args on c. It
// builds the command in one slice, with the keys and the key count boxed
// as pointers, so that it allocates at most once (go-redis's FCall boxes
// each key and the count and copies every argument): in *buf, reused,
// when buf is not nil. The slice lives as long as the command: a pipeline
// sends it later, so a call queued for one passes no buf.
func fcall(ctx context.Context, c caller, keys []string, args []any, buf *[]any) *redis.Cmd {
	var cmd []any
	if buf != nil {
		cmd = (*buf)[:0]
	}
	if n := 3 + len(keys) + len(args); cap(cmd) < n {
		cmd = make([]any, 0, n)
	}
	cmd = append(cmd, "fcall", functionArg, numKeys(len(keys)))
	for i := range keys {
		cmd = append(cmd, &keys[i])
	}
	cmd = append(cmd, args...)
	if buf != nil {
		*buf = cmd
	}
	return c.Do(ctx, cmd...)
}

// functionArg is functionName boxed once: boxing a string that is not a
// constant allocates, once per call.
var functionArg any = &functionName

// keyCounts are the texts of the key counts FCALL takes, by count.
var keyCounts = func() (k [64]string) {
	for i := range k {
		k[i] = strconv.Itoa(i)
	}
	return
}()

// numKeys returns n as a command argument: a pointer into keyCounts
// (boxing it allocates nothing), or its text for larger n.
func numKeys(n int) any {
	if n < len(keyCounts) {
		return &keyCounts[n]
	}
	return strconv.Itoa(n)
}

// run sends one decide call (keys, args as the script reads them) to
// Redis through c and returns its reply: through the coalescer
// (coalesce.go) when it is on and c is the Store's own client, else alone
// on c. It is the one way out for a decision, so that the no-blind-retry
// rule (finish) covers every call: a lost reply may hide an applied count.
//
// buf, when not nil, is the caller's scratch for the command sent at once
// (fcall), reused from call to call; it must stay the caller's until run
// returns.
func (s *Store) run(ctx context.Context, c caller, keys []string, args []any, buf *[]any) (any, error) {
	if s.coal != nil && c == caller(s.client) {
		return s.coal.do(ctx, keys, args, buf)
	}
	return s.finish(ctx, c, s.first(ctx, c, keys, args, buf), keys, args)
}

// first issues the first attempt of one call on c: sent at once on a
// client, queued on a pipeline (whose Exec sends it).
func (s *Store) first(ctx context.Context, c caller, keys []string, args []any, buf *[]any) *redis.Cmd {
	if s.chooseEngine(ctx) == engineFunction {
		return fcall(ctx, c, keys, args, buf)
	}
	return s.decide.EvalSha(ctx, c, keys, args...)
}

// finish completes a call whose first attempt has been answered (cmd):
// only an answer proving that nothing ran (NOSCRIPT, or "Function not
// found" after FUNCTION FLUSH, an empty restart or a failover to a server
// without the library) is followed by another attempt, alone on c under
// the call's own ctx: the library loaded again (every master of a
// Cluster), then the call as a script (EVALSHA, then EVAL).
func (s *Store) finish(ctx context.Context, c caller, cmd *redis.Cmd, keys []string, args []any) (any, error) {
	res, err := cmd.Result()
	switch {
	case err == nil:
		return res, nil
	case isNoFunction(err):
		if s.loadLibrary(ctx) == nil {
			res, err = fcall(ctx, c, keys, args, nil).Result()
			if err == nil || !isNoFunction(err) {
				return res, err
			}
		}
		// Lost again (flushed between the load and the call) or not
		// loadable now: this call runs as a script, whose EVAL carries
		// the code.
		return s.decide.Run(ctx, c, keys, args...).Result()
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return s.decide.Eval(ctx, c, keys, args...).Result()
	}
	return res, err
}

// chooseEngine returns the Store's engine. Until it is chosen, calls run
// with EVALSHA, and the first of them starts the choice in the
// background (settleEngine, on a budget of its own): loading the library
// compiles it, which a decision's budget need not pay for. The gateway's
// startup readiness probe (Ready) settles it before any decision.
func (s *Store) chooseEngine(ctx context.Context) engine {
	if e := engine(s.engine.v.Load()); e != engineUnknown {
		return e
	}
	if s.engine.busy.CompareAndSwap(false, true) {
		go func() {
			defer s.engine.busy.Store(false)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(s.opts.Timeout, 2*time.Second))
			defer cancel()
			s.settleEngine(ctx)
		}()
	}
	return engineScript
}

// settleEngine chooses the engine if it is not chosen yet: the Function
// library when Redis loads it, EVALSHA when Redis refuses FUNCTION LOAD
// (an older server, a renamed command, an ACL). While Redis cannot be
// reached (or is a replica, or loading) the choice waits.
func (s *Store) settleEngine(ctx context.Context) engine {
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if e := engine(s.engine.v.Load()); e != engineUnknown {
		return e
	}
	e := engineFunction
	if s.opts.NoFunctions {
		e = engineScript
	} else if err := s.loadLibrary(ctx); err != nil {
		if !refusesFunctions(err) {
			return engineUnknown
		}
		e = engineScript
	}
	s.engine.v.Store(uint32(e))
	if e == engineFunction {
		s.startRetire()
	}
	return e
}

// loadLibrary loads the Function library (on every master of a Cluster).
// A library already loaded (by another gateway of this version) is a
// success.
func (s *Store) loadLibrary(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, librarySrc).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, s.client)
	}
	if err == nil {
		s.stats.libraryLoads.Add(1)
	}
	return err
}

// isNoFunction reports whether err is Redis saying that the function
// called does not exist (it did not run).
func isNoFunction(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(err.Error(), "Function not found")
}

// refusesFunctions reports whether err is Redis refusing FUNCTION LOAD
// for good: a server without Function libraries (before 7), a renamed
// command, an ACL, a library Redis cannot register. Other errors (a
// replica's READONLY, LOADING, a lost connection) say nothing about it.
func refusesFunctions(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand") ||
		strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "registering functions") ||
		strings.Contains(msg, "compiling function")
}
