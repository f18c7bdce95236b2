package main

import (
	"context"
	"encoding"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// peerRow is one throughput measurement.
type peerRow struct {
	name      string
	decisions int64
	elapsed   time.Duration
	p99       time.Duration
	redisCPU  time.Duration // per decision
}

func (r peerRow) rate() float64 { return float64(r.decisions) / r.elapsed.Seconds() }

// drive runs f from workers goroutines (worker id, call index) for d and
// measures decisions/s, p99 and redis-server CPU per decision.
func drive(srv *server, name string, workers int, d time.Duration, f func(w, i int) error) (peerRow, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	stop := make(chan struct{})
	cpu0, _ := srv.cpu()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<16)
			for i := 0; ; i++ {
				select {
				case <-stop:
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
					return
				default:
				}
				t := time.Now()
				if err := f(w, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				local = append(local, time.Since(t))
				n.Add(1)
			}
		}()
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	el := time.Since(start)
	cpu1, _ := srv.cpu()
	if err, ok := firstErr.Load().(error); ok {
		return peerRow{}, fmt.Errorf("%s: %w", name, err)
	}
	slices.Sort(lat)
	row := peerRow{name: name, decisions: n.Load(), elapsed: el, redisCPU: (cpu1 - cpu0) / time.Duration(max(n.Load(), 1))}
	if len(lat) > 0 {
		row.p99 = lat[len(lat)*99/100]
	}
	return row, nil
}

// runPeers measures every contender against one redis-server, each for d
// from workers goroutines with one key per goroutine.
func runPeers(ctx context.Context, srv *server, as []algo, workers int, d time.Duration) ([]peerRow, error) {
	c := newClient(srv.addr, workers+2)
	defer c.Close()
	keys := make([]string, workers)
	for w := range keys {
		keys[w] = "client-" + strconv.Itoa(w)
	}
	var rows []peerRow
	add := func(r peerRow, err error) error {
		if err == nil {
			rows = append(rows, r)
		}
		return err
	}
	type contender struct {
		a      *algo
		script bool // the decide code with EVALSHA, as on Redis before 7
		coal   bool // decisions of concurrent workers coalesced, as the gateway does by default
	}
	var cs []contender
	for i := range as {
		cs = append(cs, contender{a: &as[i]})
	}
	for i := range as {
		switch as[i].name {
		case "fixed_window", "sliding_window_counter", "gcra":
			cs = append(cs, contender{a: &as[i], script: true}, contender{a: &as[i], coal: true})
		}
	}
	for _, ct := range cs {
		l := &ct.a.limit
		st, err := redisstore.New(c, redisstore.Options{NewLaneClient: redis.NewClient, Prefix: "ours:", Timeout: 5 * time.Second, DenyCacheSize: -1, NoFunctions: ct.script, Coalesce: ct.coal})
		if err != nil {
			return nil, err
		}
		// Settle the engine (Function library or script) before measuring:
		// until then a store decides with EVALSHA.
		if err := st.Ready(ctx); err != nil {
			return nil, err
		}
		name := "tollgate " + ct.a.name
		if ct.script {
			name += " (EVALSHA)"
		}
		if ct.coal {
			name += " (coalesced)"
		}
		conc := l.Algorithm == ratelimit.Concurrency
		hits := make([][]ratelimit.Hit, workers)
		outs := make([][]ratelimit.Decision, workers)
		for w := range hits {
			hits[w] = []ratelimit.Hit{{Limit: l, Key: keys[w], Cost: 1}}
			outs[w] = make([]ratelimit.Decision, 1)
		}
		err = add(drive(srv, name, workers, d, func(w, _ int) error {
			ok, err := st.Decide(ctx, time.Now(), hits[w], outs[w])
			if err == nil && !ok {
				return fmt.Errorf("denied")
			}
			if conc && err == nil {
				err = st.Release(ctx, hits[w], outs[w])
			}
			return err
		}))
		if err != nil {
			return nil, err
		}
	}
	rl := redis_rate.NewLimiter(c)
	perSec := redis_rate.PerSecond(gcraRate)
	if err := add(drive(srv, "redis_rate/v10 (GCRA)", workers, d, func(w, _ int) error {
		res, err := rl.Allow(ctx, "rr:"+keys[w], perSec)
		if err == nil && res.Allowed == 0 {
			return fmt.Errorf("denied")
		}
		return err
	})); err != nil {
		return nil, err
	}
	store, err := ulredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "ul", MaxRetry: 1})
	if err != nil {
		return nil, err
	}
	ul := limiter.New(store, limiter.Rate{Period: time.Second, Limit: 1e9})
	if err := add(drive(srv, "ulule/limiter/v3 (fixed window)", workers, d, func(w, _ int) error {
		res, err := ul.Get(ctx, keys[w])
		if err == nil && res.Reached {
			return fmt.Errorf("denied")
		}
		return err
	})); err != nil {
		return nil, err
	}
	return rows, nil
}

// runFloors measures what Redis spends on a call that does nothing: a
// Function and a script that only return their first argument, called
// with the keys and arguments of one real gcra decision, from workers
// goroutines paced at rate calls per second in all (the rate measured for
// our gcra), so that Redis sees the same calls per second and batches them
// alike. What a decision costs beyond it is the decision's own work.
func runFloors(ctx context.Context, srv *server, l *ratelimit.Limit, workers int, d time.Duration, rate float64) ([]peerRow, error) {
	c := newClient(srv.addr, workers+2)
	defer c.Close()
	fargs, eargs, err := floorCalls(ctx, c, l)
	if err != nil {
		return nil, err
	}
	var rows []peerRow
	for _, f := range []struct {
		name string
		args []any
	}{{"FCALL returning at once (floor)", fargs}, {"EVALSHA returning at once (floor)", eargs}} {
		start := time.Now()
		var seq atomic.Int64
		row, err := drive(srv, fmt.Sprintf("%s, paced at %.0f/s", f.name, rate), workers, d, func(w, i int) error {
			due := start.Add(time.Duration(float64(seq.Add(1)) / rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			return c.Do(ctx, f.args...).Err()
		})
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// floorCalls loads, through c, a Function and a script that only return
// their first argument, and returns their calls (FCALL, EVALSHA) with the
// keys and arguments of one real decision on l.
func floorCalls(ctx context.Context, c *redis.Client, l *ratelimit.Limit) (fcall, evalsha []any, err error) {
	var captured []any
	c.AddHook(captureHook{f: func(args []any) {
		if len(args) > 0 && args[0] == "fcall" && captured == nil {
			captured = freeze(args)
		}
	}})
	st, err := redisstore.New(c, redisstore.Options{Prefix: "floor:", Timeout: 5 * time.Second, DenyCacheSize: -1})
	if err != nil {
		return nil, nil, err
	}
	// Settle the engine (Function library or script) before measuring:
	// until then a store decides with EVALSHA.
	if err := st.Ready(ctx); err != nil {
		return nil, nil, err
	}
	out := make([]ratelimit.Decision, 1)
	if _, err := st.Decide(ctx, time.Now(), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out); err != nil {
		return nil, nil, err
	}
	if captured == nil {
		return nil, nil, fmt.Errorf("no FCALL seen (a Redis without Function libraries?)")
	}
	const lib = "#!lua name=tollgate_floor\nredis.register_function('tollgate_floor_return', function(keys, args) return args[1] end)"
	if err := c.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		return nil, nil, err
	}
	script := redis.NewScript("return ARGV[1]")
	if err := script.Load(ctx, c).Err(); err != nil {
		return nil, nil, err
	}
	fcall = slices.Clone(captured)
	fcall[1] = "tollgate_floor_return"
	evalsha = append([]any{"evalsha", script.Hash()}, captured[2:]...)
	return fcall, evalsha, nil
}

// runCeiling runs our script as EVALSHA with the arguments of one real
// sliding_window_counter decision, pipelined (conns connections, depth
// commands in flight each): the most decisions one Redis core serves.
func runCeiling(ctx context.Context, srv *server, l *ratelimit.Limit, conns, depth int, d time.Duration) (peerRow, error) {
	c := newClient(srv.addr, conns+1)
	defer c.Close()
	// Capture one real decision's EVALSHA arguments.
	var captured []any
	c.AddHook(captureHook{f: func(args []any) {
		if len(args) > 0 && args[0] == "evalsha" && captured == nil {
			captured = freeze(args)
		}
	}})
	st, err := redisstore.New(c, redisstore.Options{Prefix: "ceil:", Timeout: 5 * time.Second, DenyCacheSize: -1, NoFunctions: true})
	if err != nil {
		return peerRow{}, err
	}
	// Settle the engine (Function library or script) before measuring:
	// until then a store decides with EVALSHA.
	if err := st.Ready(ctx); err != nil {
		return peerRow{}, err
	}
	out := make([]ratelimit.Decision, 1)
	if _, err := st.Decide(ctx, time.Now(), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out); err != nil {
		return peerRow{}, err
	}
	if captured == nil {
		return peerRow{}, fmt.Errorf("no EVALSHA seen")
	}
	return drive(srv, fmt.Sprintf("EVALSHA ceiling (pipelined, %d conns × %d deep)", conns, depth), conns, d, func(w, i int) error {
		p := c.Pipeline()
		for range depth {
			p.Do(ctx, captured...)
		}
		_, err := p.Exec(ctx)
		return err
	})
}

// freeze copies a command's arguments by value: the store passes some
// by pointer (*string, a BinaryMarshaler) into buffers it reuses.
func freeze(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *string:
			out[i] = *v
		case encoding.BinaryMarshaler:
			b, _ := v.MarshalBinary()
			out[i] = string(b)
		default:
			out[i] = a
		}
	}
	return out
}

type captureHook struct{ f func([]any) }

func (captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h captureHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.f(cmd.Args())
		return next(ctx, cmd)
	}
}
func (captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func printPeers(w io.Writer, rows []peerRow, ceiling peerRow, depth int) {
	ceil := ceiling.rate() * float64(depth)
	fmt.Fprintln(w, "| contender | decisions/s | p99 | Redis CPU µs/decision | share of EVALSHA ceiling |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.0f | %s | %.1f | %.0f%% |\n", r.name, r.rate(), r.p99.Round(time.Microsecond),
			float64(r.redisCPU.Nanoseconds())/1e3, 100*r.rate()/ceil)
	}
	fmt.Fprintf(w, "| %s | %.0f | — | %.1f | 100%% |\n", ceiling.name, ceil,
		float64(ceiling.redisCPU.Nanoseconds())/1e3/float64(depth))
}
