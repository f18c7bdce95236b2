// Command redispeers benchmarks Tollgate's Redis store against the Redis
// rate limiters people run today and against the ceiling one Redis core
// allows, all against one redis-server it starts (and stops by PID).
//
//	go run . -cost             Redis cost per decision of our script, per algorithm
//	go run . -cost -callgrind  the same with redis-server under callgrind (instructions)
//	go run . -distinct -n 20  Redis's time for an estimated distinct key's move to a new sub-window
//	                           (-callgrind: instructions)
//	go run . -micro            what single commands and Lua operations cost inside a Function (callgrind)
//	go run . -peers            decisions/s and p99: ours (Function library and EVALSHA) vs redis_rate vs
//	                           ulule/limiter, the floor (a Function and a script that only return, paced
//	                           at our gcra's rate) and the pipelined EVALSHA ceiling
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's internal log lines (dial retries while a server
// starts).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	cost := flag.Bool("cost", false, "measure Redis's cost per decision of our script")
	callgrind := flag.Bool("callgrind", false, "with -cost: run redis-server under valgrind callgrind and count instructions")
	n := flag.Int("n", 5000, "with -cost: decisions per case")
	micro := flag.Bool("micro", false, "under callgrind: instructions of single commands and Lua operations inside a Function")
	peers := flag.Bool("peers", false, "measure throughput and p99 against the peers and the EVALSHA ceiling")
	flag.StringVar(&only, "only", "", "with -cost: run only the cases whose name contains this (or one of these, separated by |)")
	flag.BoolVar(&keepDumps, "keep", false, "with -callgrind: keep the dumps for callgrind_annotate")
	workers := flag.Int("workers", 8, "with -peers: goroutines per contender")
	dur := flag.Duration("d", 3*time.Second, "with -peers: duration per contender")
	distinctMove := flag.Bool("distinct", false, "Redis's time (-callgrind: instructions) of the call moving an estimated distinct key to a new sub-window")
	logSize := flag.Bool("logsize", false, "measure Redis's time per decision on sliding_window_log keys of growing length")
	flag.Parse()
	peerWorkers, peerDur = *workers, *dur
	redis.SetLogger(quiet{})
	if *distinctMove {
		if err := runDistinctServer(*n, *callgrind); err != nil {
			fmt.Fprintln(os.Stderr, "redispeers:", err)
			os.Exit(1)
		}
		return
	}
	if *logSize {
		if err := runLogSizeServer(*n); err != nil {
			fmt.Fprintln(os.Stderr, "redispeers:", err)
			os.Exit(1)
		}
		return
	}
	if *micro {
		if err := runMicroServer(*n); err != nil {
			fmt.Fprintln(os.Stderr, "redispeers:", err)
			os.Exit(1)
		}
		return
	}
	if !*cost && !*peers {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*cost, *callgrind, *n, *peers); err != nil {
		fmt.Fprintln(os.Stderr, "redispeers:", err)
		os.Exit(1)
	}
}

// only filters the cost cases by name.
var only string

var (
	peerWorkers int
	peerDur     time.Duration
)

func run(cost, callgrind bool, n int, peers bool) error {
	ctx := context.Background()
	as, err := algos()
	if err != nil {
		return err
	}
	if cost {
		srv, err := startRedis(callgrind)
		if err != nil {
			return err
		}
		var cases []costCase
		for _, c := range costCases(as) {
			for _, o := range strings.Split(only, "|") {
				if strings.Contains(c.name, o) {
					cases = append(cases, c)
					break
				}
			}
		}
		rows, err := runCost(ctx, srv, cases, n)
		srv.stop()
		if err != nil {
			return err
		}
		printCost(os.Stdout, rows, callgrind)
	}
	if peers {
		srv, err := startRedis(false)
		if err != nil {
			return err
		}
		defer srv.stop()
		var counter *algo
		for i := range as {
			if as[i].name == "sliding_window_counter" {
				counter = &as[i]
			}
		}
		const conns, depth = 4, 32
		ceiling, err := runCeiling(ctx, srv, &counter.limit, conns, depth, peerDur)
		if err != nil {
			return err
		}
		rows, err := runPeers(ctx, srv, as, peerWorkers, peerDur)
		if err != nil {
			return err
		}
		var gcra *algo
		var gcraRate float64
		for i := range as {
			if as[i].name == "gcra" {
				gcra = &as[i]
			}
		}
		for _, r := range rows {
			if r.name == "tollgate gcra" {
				gcraRate = r.rate()
			}
		}
		floors, err := runFloors(ctx, srv, &gcra.limit, peerWorkers, peerDur, gcraRate)
		if err != nil {
			return err
		}
		rows = append(rows, floors...)
		printPeers(os.Stdout, rows, ceiling, depth)
	}
	return nil
}

// runLogSizeServer runs runLogSize against its own redis-server, n
// decisions per length and outcome (3 from 100,000 entries on: they take
// seconds each).
func runLogSizeServer(n int) error {
	srv, err := startRedis(false)
	if err != nil {
		return err
	}
	defer srv.stop()
	rows, err := runLogSize(context.Background(), srv, n)
	if err != nil {
		return err
	}
	printLogSize(os.Stdout, rows)
	return nil
}

// runMicroServer runs runMicro against its own redis-server under callgrind.
func runMicroServer(n int) error {
	srv, err := startRedis(true)
	if err != nil {
		return err
	}
	defer srv.stop()
	return runMicro(context.Background(), srv, n, os.Stdout)
}
