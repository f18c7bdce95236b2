package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/replay"
)

// replayCommand implements `gateway replay --config PATH --log FILE
// [--format combined|jsonl] [--reorder-window D] [--gateways N]`: it replays an access log through the
// configured routes, identities and limits on the log's own clock and
// prints what every limit decided. Malformed lines go to stderr.
func replayCommand(args, environ []string, stdout, stderr io.Writer) int {
	var f commonFlags
	fs := newFlagSet("replay", stderr, &f)
	logPath := fs.String("log", "", "access log to replay (required; - for stdin)")
	format := fs.String("format", "auto", "log format: combined, jsonl or auto (per line)")
	window := fs.Duration("reorder-window", 0, "put lines in time order within this latency (default: the longest latency in the log)")
	gateways := fs.Int("gateways", 1, "replay batched limits (sync = \"batched\") across this many gateways sharing one store")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if *logPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "gateway replay: --log FILE is required and takes no arguments")
		return exitInvalid
	}
	lf, err := accesslog.ParseFormat(*format)
	if err != nil {
		fmt.Fprintf(stderr, "gateway replay: --format: %v\n", err)
		return exitInvalid
	}
	p, err := loadOfflinePolicy(f.config, environ)
	if err != nil {
		printProblems(stderr, f.config, err)
		return exitInvalid
	}
	in := io.Reader(os.Stdin)
	if *logPath != "-" {
		file, err := os.Open(*logPath)
		if err != nil {
			fmt.Fprintf(stderr, "gateway replay: %v\n", err)
			return exitFailure
		}
		defer file.Close()
		in = file
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *gateways < 1 || *gateways > 1000 {
		fmt.Fprintln(stderr, "gateway replay: --gateways must be in 1..1000")
		return exitInvalid
	}
	rep, err := replay.Run(ctx, p, in, replay.Options{Format: lf, Errors: stderr, ReorderWindow: *window, Gateways: *gateways})
	if rep != nil {
		if werr := rep.Write(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway replay: %v\n", err)
		return exitFailure
	}
	return exitOK
}
