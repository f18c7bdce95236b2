// Command peerbench puts Tollgate beside the floor of its stack
// (bench/floor) and nginx on loopback and measures
// them under the same wrk load: req/s, latency, and the figures to compare
// on, CPU time per request of each process (from /proc) and user-space
// instructions per request (valgrind callgrind, when installed; `perf stat`
// counters are used by nobody here because most VMs do not expose them).
//
//	go run ./bench/cmd/peerbench [-rounds 3] [-duration 5s] [-c 16] [-t 1] [-write docs/benchmarks/peer-nginx.md] [-base-root DIR]
//
// With -base-root, the gateway of an older checkout is measured in the
// same run as peer "base", so that a change is judged before and after
// under the same load.
//
// It starts a standard-library upstream, one gateway per mode (built from
// ./cmd/gateway), one nginx with a server block per mode and a
// redis-server for the Redis modes; it drives each target with wrk in
// several rounds, alternating targets, and prints a Markdown table (and
// writes it into docs/benchmarks/peer-nginx.md with -write). Every process
// it starts is stopped by PID on exit, including on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "upstream" {
		os.Exit(upstreamMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "protocols" {
		os.Exit(protocolsMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

// options are peerbench's flags.
type options struct {
	rounds       int
	duration     time.Duration
	warmup       time.Duration
	load         load
	modes        string
	nginxWorkers int
	callgrind    string
	cgDuration   time.Duration
	write        string
	root         string
	baseRoot     string
	keepTmp      bool
	gcMinHeap    int64
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds per target (targets alternate within a round)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "wrk duration of one measured round")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "wrk warm-up per target before the rounds")
	fs.IntVar(&o.load.threads, "t", 1, "wrk threads")
	fs.IntVar(&o.load.conns, "c", 16, "wrk connections")
	fs.IntVar(&o.load.keys, "keys", 10000, "distinct API keys of the 10k-keys modes")
	fs.StringVar(&o.modes, "modes", "all", "comma-separated modes: "+modeNames())
	fs.IntVar(&o.nginxWorkers, "nginx-workers", runtime.NumCPU(), "nginx worker_processes")
	fs.StringVar(&o.callgrind, "callgrind", "auto", "instructions per request under valgrind callgrind: auto (when installed), on, off")
	fs.DurationVar(&o.cgDuration, "callgrind-duration", 3*time.Second, "wrk duration of each callgrind measurement")
	fs.StringVar(&o.write, "write", "", "Markdown file whose peer-benchmark section is replaced with the results")
	fs.StringVar(&o.root, "root", ".", "module root holding ./cmd/gateway")
	fs.StringVar(&o.baseRoot, "base-root", "", "module root of an older checkout: its gateway is measured too, as peer \"base\", in every mode (before/after in one run)")
	fs.BoolVar(&o.keepTmp, "keep", false, "keep the temporary directory (configs, logs, callgrind dumps)")
	fs.Int64Var(&o.gcMinHeap, "gc-min-heap", -1, "server.gc_min_heap of the gateway under test, in bytes (0: Go's own pacing); -1 leaves the gateway's default")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.load.hotKey = "hot-key"
	modes, err := selectModes(o.modes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 2
	}
	if err := checkTools(modes, &o); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 1
	}

	tmp, err := os.MkdirTemp("", "peerbench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 1
	}
	ps := &procs{}
	cleanup := func() {
		ps.stopAll()
		if !o.keepTmp {
			os.RemoveAll(tmp)
		} else {
			fmt.Fprintln(os.Stderr, "peerbench: kept", tmp)
		}
	}
	defer cleanup()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	res, err := bench(ctx, &o, modes, tmp, ps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 1
	}
	md := report(&o, res, args)
	fmt.Print(md)
	if o.write != "" {
		if err := replaceSection(o.write, sectionHeading, beginMarker, endMarker, md); err != nil {
			fmt.Fprintln(os.Stderr, "peerbench:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "peerbench: wrote", o.write)
	}
	return 0
}

func modeNames() string {
	var names []string
	for _, m := range allModes {
		names = append(names, m.name)
	}
	return strings.Join(names, ",")
}

func selectModes(list string) ([]mode, error) {
	if list == "all" {
		return allModes, nil
	}
	var out []mode
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, m := range allModes {
			if m.name == strings.TrimSpace(name) {
				out, found = append(out, m), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown mode %q (modes: %s)", name, modeNames())
		}
	}
	return out, nil
}

// checkTools fails with an install hint when a required tool is missing,
// and settles -callgrind auto.
func checkTools(modes []mode, o *options) error {
	need := []struct{ bin, pkg string }{{"wrk", "wrk"}, {"nginx", "nginx"}, {"go", "golang (https://go.dev/dl/)"}}
	for _, m := range modes {
		if m.redis {
			need = append(need, struct{ bin, pkg string }{"redis-server", "redis-server"})
			break
		}
	}
	var errs []error
	for _, n := range need {
		if _, err := lookPath(n.bin); err != nil {
			errs = append(errs, fmt.Errorf("%s not found: install it (apt-get install %s)", n.bin, n.pkg))
		}
	}
	_, vgErr := exec.LookPath("valgrind")
	_, cgErr := exec.LookPath("callgrind_control")
	switch o.callgrind {
	case "auto":
		o.callgrind = map[bool]string{true: "on", false: "off"}[vgErr == nil && cgErr == nil]
	case "on":
		if vgErr != nil || cgErr != nil {
			errs = append(errs, errors.New("valgrind/callgrind_control not found: install them (apt-get install valgrind) or pass -callgrind off"))
		}
	case "off":
	default:
		errs = append(errs, fmt.Errorf("-callgrind %q: want auto, on or off", o.callgrind))
	}
	return errors.Join(errs...)
}

// lookPath finds bin on PATH or in /usr/sbin (nginx lives there and
// /usr/sbin is not on every user's PATH).
func lookPath(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", bin)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", exec.ErrNotFound
}
