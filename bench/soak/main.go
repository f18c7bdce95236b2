// Command soak runs a gateway under mixed traffic for minutes and checks
// that it does not leak: allowed requests over many API keys, requests
// denied by a hot key's limit, upstream 500s, resets, an unreachable
// upstream, upstream timeouts, clients hanging up mid-request, and a SIGHUP
// reload every few seconds. Every interval it samples the gateway from
// outside (goroutines and heap from /debug/pprof on the admin listener,
// RSS and open file descriptors from /proc) and at the end writes
// soak.csv and soak.png (one line chart per resource) into -out, prints a
// Markdown table, and exits 1 if a resource kept growing or any request
// had an outcome other than its kind's (e.g. a 5xx on an allowed request).
//
// Loopback only; the gateway is built from ./cmd/gateway and stopped by PID.
//
//	go run ./bench/soak                    # 10 minutes, results in bench/soak/results
//	go run ./bench/soak -duration 30s -out /tmp/soak
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

func main() {
	root, err := probe.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	o := options{Root: root, Log: os.Stderr, SettleWithin: 15 * time.Second}
	flag.DurationVar(&o.Duration, "duration", 10*time.Minute, "traffic time")
	flag.DurationVar(&o.Interval, "interval", 5*time.Second, "time between samples")
	flag.DurationVar(&o.ReloadEvery, "reload-every", 3*time.Second, "time between SIGHUP reloads")
	flag.IntVar(&o.RPS, "rps", 1000, "offered requests per second (all kinds)")
	flag.IntVar(&o.Workers, "workers", 16, "concurrent clients")
	flag.IntVar(&o.Keys, "keys", 5000, "distinct API keys of the allowed traffic")
	flag.StringVar(&o.Gateway, "gateway", "", "gateway binary (default: build ./cmd/gateway)")
	flag.StringVar(&o.Out, "out", filepath.Join(root, "bench", "soak", "results"), "directory for soak.csv and soak.png")
	rows := flag.Int("table-rows", 11, "rows of the printed Markdown table")
	flag.Parse()
	if o.Duration <= 0 || o.Duration > 24*time.Hour || o.RPS <= 0 || o.Workers <= 0 || o.Keys <= 0 || o.Interval <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -duration must be in (0, 24h]; -rps, -workers, -keys, -interval > 0")
		os.Exit(2)
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	fmt.Printf("soak: %s of traffic, %d samples, results in %s\n\n", o.Duration, len(rep.Rows), o.Out)
	markdown(os.Stdout, rep, *rows)
	fmt.Println()
	kinds := make([]string, 0, len(rep.ByKind))
	for k, v := range rep.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(kinds)
	fmt.Println("requests by kind:", strings.Join(kinds, ", "))
	problems := verdict(rep)
	for _, p := range problems {
		fmt.Println("FAIL:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Println("PASS: goroutines, heap, RSS and fds flat; every request had its expected outcome")
}

// verdict lists everything that makes the run a failure.
func verdict(rep *report) []string {
	problems := flatness(rep)
	last := rep.Rows[len(rep.Rows)-1]
	if last.Unexpected > 0 {
		problems = append(problems, fmt.Sprintf("%d requests with an unexpected outcome, e.g. %q", last.Unexpected, rep.Unexpected))
	}
	if rep.ReloadsFailed > 0 {
		problems = append(problems, fmt.Sprintf("%d reloads could not be sent", rep.ReloadsFailed))
	}
	if last.Reloads == 0 || last.S429 == 0 || last.S5xx == 0 || last.Disconnects == 0 || last.S2xx == 0 {
		problems = append(problems, fmt.Sprintf("the mix was incomplete: 2xx %d, 429 %d, 5xx %d, disconnects %d, reloads %d",
			last.S2xx, last.S429, last.S5xx, last.Disconnects, last.Reloads))
	}
	return problems
}
