// Command accuracy prints Tollgate's accuracy table: every algorithm against
// the exact sliding log on generated traces (see package accuracy).
//
//	go run ./cmd/accuracy                      # the published run
//	go run ./cmd/accuracy -requests 20000000   # a bigger one
//	go run ./cmd/accuracy -distinct            # the distinct algorithm's count
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/tollgate/gateway/accuracy"
	"github.com/tollgate/gateway/ratelimit"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rate := fs.String("rate", "100/minute", "the limit every algorithm enforces, L/W")
	precision := fs.Duration("precision", time.Second, "sub-bucket width of the precise sliding counter (0: leave it out)")
	requests := fs.Int("requests", 1_000_000, "requests per trace")
	keys := fs.Int("keys", 1000, "clients per trace")
	seed := fs.Uint64("seed", 1, "random seed")
	median := fs.Float64("median", 0.25, "median client rate as a fraction of L/W (client rates are log-normal)")
	spread := fs.Float64("spread", 1, "standard deviation of the log of client rates")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "traces and evaluations run at once")
	distinct := fs.Bool("distinct", false, "print the distinct algorithm's tables instead: its count against the true number of distinct values, 10^2..10^7, and the values a limit admits")
	trials := fs.Int("trials", 10, "with -distinct: independent streams per row")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *distinct {
		return runDistinct(stdout, stderr, *seed, *trials)
	}
	r, err := ratelimit.ParseRate(*rate)
	if err != nil {
		fmt.Fprintln(stderr, "accuracy: -rate:", err)
		return 2
	}
	s := accuracy.Suite{
		Config: accuracy.Config{Seed: *seed, Keys: *keys, Requests: *requests, Rate: r,
			Median: *median, Spread: *spread},
		Precision: *precision,
		Workers:   *workers,
	}
	start := time.Now()
	rs, err := s.Run()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var total int64
	for _, x := range rs {
		total += x.Requests
	}
	fmt.Fprintf(stdout, "rate %s, precision %s, %d keys, median %g, spread %g, seed %d: %d decisions in %s\n\n",
		r, *precision, *keys, *median, *spread, *seed, total, time.Since(start).Round(time.Millisecond))
	if err := accuracy.WriteTable(stdout, rs); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// runDistinct prints the distinct algorithm's accuracy tables.
func runDistinct(stdout, stderr io.Writer, seed uint64, trials int) int {
	start := time.Now()
	counts := accuracy.DistinctCounts(seed, trials, 10_000_000)
	limits := accuracy.DistinctLimits(seed, trials, []int64{5, 128, 129, 1000, 5000, 10_000})
	fmt.Fprintf(stdout, "distinct: %d trials per row, seed %d, in %s\n\n", trials, seed, time.Since(start).Round(time.Millisecond))
	if err := accuracy.WriteDistinctTables(stdout, counts, limits); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
