// Command keyrot is the key-rotation attack: it sends millions of distinct
// API keys, one request each, at full speed to a gateway whose in-memory
// store is bounded by store.memory.max_keys, and samples the gateway from
// outside (RSS from /proc, heap from /debug/pprof, the live-key gauge from
// /metrics) and the throughput per interval. It prints a Markdown table and
// exits 1 unless RSS plateaus once max_keys is reached.
//
// With -redis HOST:PORT the gateway uses that Redis instead, and afterwards
// every key under tollgate: is checked for a TTL (redis-cli).
//
// Loopback only; bounded by -keys and -timeout.
//
//	go run ./bench/keyrot                              # 2,000,000 keys, max_keys 100,000
//	go run ./bench/keyrot -keys 200000 -redis 127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

func main() {
	o := options{Log: os.Stderr}
	flag.IntVar(&o.Keys, "keys", 2_000_000, "distinct API keys to send (one request each)")
	flag.IntVar(&o.MaxKeys, "max-keys", 100_000, "store.memory.max_keys")
	flag.IntVar(&o.Workers, "workers", 32, "concurrent clients")
	flag.DurationVar(&o.Interval, "interval", 2*time.Second, "time between samples")
	flag.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "bound of the traffic phase")
	flag.StringVar(&o.Redis, "redis", "", "HOST:PORT of a Redis to use as the store (default: memory)")
	flag.StringVar(&o.Gateway, "gateway", "", "gateway binary (default: build ./cmd/gateway)")
	rows := flag.Int("table-rows", 12, "rows of the printed table")
	flag.Parse()
	if o.Keys <= 0 || o.Keys > 100_000_000 || o.MaxKeys <= 0 || o.Workers <= 0 || o.Interval <= 0 || o.Timeout <= 0 {
		fmt.Fprintln(os.Stderr, "keyrot: -keys in (0, 1e8], -max-keys, -workers, -interval, -timeout > 0")
		os.Exit(2)
	}
	root, err := probe.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "keyrot:", err)
		os.Exit(2)
	}
	o.Root = root
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "keyrot:", err)
		os.Exit(1)
	}
	med, low := throughput(res)
	fmt.Printf("keyrot: %d keys sent in %.1fs (%.0f req/s overall; per %v interval median %.0f, min %.0f), max_keys %d, %d non-200, %d errors\n\n",
		res.Sent, res.Elapsed.Seconds(), float64(res.Sent)/res.Elapsed.Seconds(), o.Interval, med, low, o.MaxKeys, res.Non200, res.Errors)
	table(os.Stdout, res, *rows)
	fmt.Println()
	var problems []string
	if o.Redis == "" {
		problems = plateau(res, o.MaxKeys)
	} else {
		fmt.Printf("redis: %d keys under tollgate:, %d without a TTL\n", res.RedisKeys, res.RedisNoTTL)
		if res.RedisNoTTL > 0 {
			problems = append(problems, fmt.Sprintf("%d Redis keys have no TTL", res.RedisNoTTL))
		}
	}
	if res.Non200 > 0 || res.Errors > 0 {
		problems = append(problems, fmt.Sprintf("%d non-200 responses and %d errors (first: %s)", res.Non200, res.Errors, res.FirstErr))
	}
	if res.Sent < int64(o.Keys) {
		problems = append(problems, fmt.Sprintf("only %d of %d keys sent within -timeout %v", res.Sent, o.Keys, o.Timeout))
	}
	for _, p := range problems {
		fmt.Println("FAIL:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Println("PASS")
}
