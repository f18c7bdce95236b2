package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// algo is one limit decided by our store in the benchmarks.
type algo struct {
	name  string
	limit ratelimit.Limit
}

// gcraRate is the rate (per second) of the GCRA limits, ours and
// redis_rate's: at most one emission interval per microsecond, so that
// every decision moves the state by a representable amount and writes it
// (at 2^40/s the increment vanishes in the timestamp's rounding and both
// scripts skip their write).
const gcraRate = 1_000_000

// algos are the limits every benchmark runs: rates high enough to allow
// every request (sliding_window_log holds at most 100 entries).
func algos() ([]algo, error) {
	r := func(n int64, w time.Duration) []ratelimit.Rate { return []ratelimit.Rate{{Limit: n, Window: w}} }
	as := []algo{
		{"fixed_window", ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Rates: r(1<<40, time.Minute)}},
		{"fixed_window_elastic", ratelimit.Limit{Algorithm: ratelimit.FixedWindowElastic, Rates: r(1<<40, time.Minute)}},
		{"sliding_window_log", ratelimit.Limit{Algorithm: ratelimit.SlidingWindowLog, Rates: r(100, time.Millisecond)}},
		{"sliding_window_counter", ratelimit.Limit{Algorithm: ratelimit.SlidingWindowCounter, Rates: r(1e9, time.Second)}},
		{"token_bucket", ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Rates: r(1<<40, time.Second)}},
		{"gcra", ratelimit.Limit{Algorithm: ratelimit.GCRA, Rates: r(gcraRate, time.Second)}},
		{"concurrency", ratelimit.Limit{Algorithm: ratelimit.Concurrency, MaxInFlight: 1 << 40}},
	}
	for i := range as {
		as[i].limit.Name = as[i].name
		if err := as[i].limit.Finish(); err != nil {
			return nil, fmt.Errorf("%s: %w", as[i].name, err)
		}
	}
	return as, nil
}

// costCase is one row of the script-cost table.
type costCase struct {
	name  string
	limit *ratelimit.Limit
	keys  int // distinct keys cycled through (1 = one hot key, allowed)
	clock ratelimit.Clock
	// script runs the decide code with EVALSHA (redisstore.Options
	// NoFunctions) instead of the Function library.
	script bool
	// denied makes every measured decision a denial: the limit is
	// limit's algorithm at one unit an hour, spent in the warm-up. A
	// one-hit denial is answered with the full reply, an allowed one
	// mostly with the short reply.
	denied bool
	// floor, when set, replaces the decision by the call of a Function
	// ("fcall") or a script ("evalsha") that only returns, with the
	// arguments of a real decision on limit.
	floor string
	// second, when set, makes every decision a call of two hits: limit
	// on key a<k>, second on key p<k> (an Envoy rate limit service call
	// of two descriptors, each a one-window fixed window).
	second *ratelimit.Limit
	// peer, when set, replaces the decision by another rate limiter's
	// (ulule/limiter, redis_rate) on the same client: its script measured
	// in the same harness as ours.
	peer func(c *redis.Client) (func(ctx context.Context, key string) error, error)
}

// costRow is what one case cost Redis per decision.
type costRow struct {
	name          string
	cpu           time.Duration // redis-server user+sys CPU per decision
	usecPerCall   float64       // INFO commandstats usec per FCALL or EVALSHA (the code's run only)
	innerCalls    float64       // redis.call()s per decision (commandstats, all but EVALSHA)
	inner         string        // which ones
	instructions  float64       // callgrind, 0 when not measured
	decisionsDone int
}

func newClient(addr string, pool int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		PoolSize: pool, PoolTimeout: 5 * time.Second,
	})
}

// runCost decides n times sequentially for every case against srv and
// reports Redis's cost per decision.
func runCost(ctx context.Context, srv *server, cases []costCase, n int) ([]costRow, error) {
	c := newClient(srv.addr, 4)
	defer c.Close()
	var rows []costRow
	for i, cs := range cases {
		st, err := redisstore.New(c, redisstore.Options{Prefix: fmt.Sprintf("cost%d:", i), Clock: cs.clock,
			Timeout: 30 * time.Second, DenyCacheSize: -1, NoFunctions: cs.script})
		if err != nil {
			return nil, err
		}
		// Settle the engine (Function library or script) before measuring:
		// until then a store decides with EVALSHA.
		if err := st.Ready(ctx); err != nil {
			return nil, err
		}
		hits := []ratelimit.Hit{{Limit: cs.limit, Cost: 1}}
		if cs.second != nil {
			hits = append(hits, ratelimit.Hit{Limit: cs.second, Cost: 1})
		}
		out := make([]ratelimit.Decision, len(hits))
		keys := make([]string, cs.keys)
		for k := range keys {
			keys[k] = "client-" + strconv.Itoa(k)
		}
		var peer func(ctx context.Context, key string) error
		if cs.peer != nil {
			if peer, err = cs.peer(c); err != nil {
				return nil, fmt.Errorf("%s: %w", cs.name, err)
			}
		}
		var floor []any
		if cs.floor != "" {
			f, e, err := floorCalls(ctx, c, cs.limit)
			if err != nil {
				return nil, err
			}
			floor = map[string][]any{"fcall": f, "evalsha": e}[cs.floor]
		}
		decide := func(j int) error {
			if floor != nil {
				return c.Do(ctx, floor...).Err()
			}
			if peer != nil {
				return peer(ctx, fmt.Sprintf("cost%d:%s", i, keys[j%len(keys)]))
			}
			hits[0].Key = keys[j%len(keys)]
			if cs.second != nil {
				hits[0].Key, hits[1].Key = "a"+keys[j%len(keys)], "p"+keys[j%len(keys)]
			}
			ok, err := st.Decide(ctx, time.Now(), hits, out)
			switch {
			case err == nil && cs.denied && ok && j > 0:
				err = fmt.Errorf("allowed past the limit")
			case err == nil && !cs.denied && !ok:
				err = fmt.Errorf("denied")
			}
			if cs.limit != nil && cs.limit.Algorithm == ratelimit.Concurrency && err == nil {
				err = st.Release(ctx, hits, out)
			}
			return err
		}
		for j := range min(200, n) { // warm-up: script loaded, connections open
			if err := decide(j); err != nil {
				return nil, fmt.Errorf("%s: %w", cs.name, err)
			}
		}
		calls0, usec0, err := commandCalls(ctx, c)
		if err != nil {
			return nil, err
		}
		if srv.callgrind != "" {
			if err := srv.zero(); err != nil {
				return nil, err
			}
		}
		cpu0, _ := srv.cpu()
		for j := range n {
			if err := decide(j + 200); err != nil {
				return nil, fmt.Errorf("%s: %w", cs.name, err)
			}
		}
		cpu1, _ := srv.cpu()
		row := costRow{name: cs.name, cpu: (cpu1 - cpu0) / time.Duration(n), decisionsDone: n}
		if srv.callgrind != "" {
			ins, err := srv.instructions()
			if err != nil {
				return nil, err
			}
			row.instructions = float64(ins) / float64(n)
		}
		calls1, usec1, err := commandCalls(ctx, c)
		if err != nil {
			return nil, err
		}
		var inner []string
		for name, v := range calls1 {
			d := v - calls0[name]
			switch name {
			case "evalsha", "eval", "fcall", "function|load":
				if name == "evalsha" || name == "fcall" {
					row.usecPerCall = float64(usec1[name]-usec0[name]) / float64(d)
				}
				continue
			case "info", "ping", "hello", "client|setinfo", "client|setname":
				continue
			}
			if d > 0 {
				if cs.limit != nil && cs.limit.Algorithm == ratelimit.Concurrency && name == "evalsha" {
					continue
				}
				row.innerCalls += float64(d) / float64(n)
				inner = append(inner, fmt.Sprintf("%s %.2f", strings.ToUpper(name), float64(d)/float64(n)))
			}
		}
		sort.Strings(inner)
		row.inner = strings.Join(inner, ", ")
		rows = append(rows, row)
	}
	return rows, nil
}

func costCases(as []algo) []costCase {
	var cs []costCase
	for i := range as {
		cs = append(cs, costCase{name: as[i].name, limit: &as[i].limit, keys: 1},
			costCase{name: as[i].name + " (EVALSHA)", limit: &as[i].limit, keys: 1, script: true})
	}
	for i := range as {
		if as[i].name == "fixed_window" {
			cs = append(cs, costCase{name: "ulule/limiter/v3 fixed window (INCRBY, PTTL)", keys: 1, peer: ululeCost})
		}
		if as[i].name == "fixed_window" {
			// An Envoy rate limit service call of two descriptors, each
			// a fixed window (a second limit of other counts), beside
			// envoyproxy/ratelimit's Redis work for the same call.
			l2 := ratelimit.Limit{Name: "fixed_window_2", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 1 << 41, Window: time.Second}}}
			if err := l2.Finish(); err == nil {
				for _, keys := range []int{1, 10000} {
					n := fmt.Sprintf("RLS call, 2 fixed windows, %d keys", keys)
					cs = append(cs,
						costCase{name: n, limit: &as[i].limit, second: &l2, keys: keys},
						costCase{name: n + ", clock=store", limit: &as[i].limit, second: &l2, keys: keys, clock: ratelimit.ClockStore},
						costCase{name: n + " (EVALSHA)", limit: &as[i].limit, second: &l2, keys: keys, script: true})
				}
				cs = append(cs,
					costCase{name: "envoyproxy/ratelimit: 2 × (INCRBY, EXPIRE) pipelined, 1 keys", keys: 1, peer: referenceCost},
					costCase{name: "envoyproxy/ratelimit: 2 × (INCRBY, EXPIRE) pipelined, 10000 keys", keys: 10000, peer: referenceCost})
			}
		}
		if as[i].name == "gcra" {
			cs = append(cs, costCase{name: "redis_rate/v10 GCRA (TIME, GET, SET EX)", keys: 1, peer: redisRateCost})
			cs = append(cs,
				costCase{name: "floor: FCALL returning at once (gcra's arguments)", limit: &as[i].limit, keys: 1, floor: "fcall"},
				costCase{name: "floor: EVALSHA returning at once (gcra's arguments)", limit: &as[i].limit, keys: 1, floor: "evalsha"})
		}
		switch as[i].name {
		case "fixed_window", "fixed_window_elastic", "sliding_window_counter", "token_bucket", "gcra":
			// a fresh Limit: Finish reuses a copy's params in place
			l := ratelimit.Limit{Name: as[i].name, Algorithm: as[i].limit.Algorithm, Rates: []ratelimit.Rate{{Limit: 1, Window: time.Hour}}}
			if err := l.Finish(); err == nil {
				cs = append(cs, costCase{name: as[i].name + ", denied", limit: &l, keys: 1, denied: true})
			}
		}
		if as[i].name == "sliding_window_counter" {
			cs = append(cs,
				costCase{name: "sliding_window_counter, 10k keys", limit: &as[i].limit, keys: 10000},
				costCase{name: "sliding_window_counter, clock=store", limit: &as[i].limit, keys: 1, clock: ratelimit.ClockStore})
		}
	}
	return cs
}

func printCost(w io.Writer, rows []costRow, callgrind bool) {
	fmt.Fprintf(w, "| case | Redis CPU µs/decision | FCALL/EVALSHA usec_per_call | redis.call per decision |")
	if callgrind {
		fmt.Fprintf(w, " Redis instr/decision |")
	}
	fmt.Fprintf(w, "\n|---|---:|---:|---|")
	if callgrind {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.1f | %.2f | %.2f (%s) |", r.name, float64(r.cpu.Nanoseconds())/1e3, r.usecPerCall, r.innerCalls, r.inner)
		if callgrind {
			fmt.Fprintf(w, " %.1fk |", r.instructions/1e3)
		}
		fmt.Fprintln(w)
	}
}

// ululeCost decides with ulule/limiter's Redis store (its INCRBY script)
// at the rate of our fixed_window case: never reached, like ours.
func ululeCost(c *redis.Client) (func(ctx context.Context, key string) error, error) {
	store, err := ulredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "ul", MaxRetry: 1})
	if err != nil {
		return nil, err
	}
	ul := limiter.New(store, limiter.Rate{Period: time.Minute, Limit: 1 << 40})
	return func(ctx context.Context, key string) error {
		res, err := ul.Get(ctx, key)
		if err == nil && res.Reached {
			err = fmt.Errorf("denied")
		}
		return err
	}, nil
}

// redisRateCost decides with redis_rate's GCRA script at our gcra case's
// rate (gcraRate per second: every call moves the state and writes it).
func redisRateCost(c *redis.Client) (func(ctx context.Context, key string) error, error) {
	rl := redis_rate.NewLimiter(c)
	lim := redis_rate.PerSecond(gcraRate)
	return func(ctx context.Context, key string) error {
		res, err := rl.Allow(ctx, key, lim)
		if err == nil && res.Allowed == 0 {
			err = fmt.Errorf("denied")
		}
		return err
	}, nil
}

// referenceCost is envoyproxy/ratelimit's Redis work for a call of two
// descriptors (its fixed_cache_impl: per descriptor an INCRBY of the hits
// and an EXPIRE of the unit, all in one pipeline; keys named
// domain_key_value_window-start as it names them).
func referenceCost(c *redis.Client) (func(ctx context.Context, key string) error, error) {
	return func(ctx context.Context, key string) error {
		w := strconv.FormatInt(time.Now().Unix(), 10)
		p := c.Pipeline()
		p.IncrBy(ctx, "edge_remote_address_"+key+"_"+w, 1)
		p.Expire(ctx, "edge_remote_address_"+key+"_"+w, time.Second)
		p.IncrBy(ctx, "edge_path_/api/"+key+"_"+w, 1)
		p.Expire(ctx, "edge_path_/api/"+key+"_"+w, time.Second)
		_, err := p.Exec(ctx)
		return err
	}, nil
}
