package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/tollgate/gateway/limittest"
)

// testCommand implements `gateway test --config PATH CASES...`: it runs
// the limit tests of each cases file against the configuration and exits
// 0 when all pass, 1 when one fails, 2 on a bad configuration or cases
// file.
func testCommand(args, environ []string, stdout, stderr io.Writer) int {
	var f commonFlags
	fs := newFlagSet("test", stderr, &f)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "gateway test: name at least one cases file")
		return exitInvalid
	}
	p, err := loadOfflinePolicy(f.config, environ)
	if err != nil {
		printProblems(stderr, f.config, err)
		return exitInvalid
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code := exitOK
	for _, path := range fs.Args() {
		cf, err := limittest.Load(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: invalid cases file:\n", path)
			for _, line := range problems(err) {
				fmt.Fprintf(stderr, "  %s\n", line)
			}
			return exitInvalid
		}
		res, err := limittest.Run(ctx, p, cf)
		fmt.Fprintf(stdout, "%s:\n", path)
		if werr := res.Write(stdout); werr != nil && err == nil {
			err = werr
		}
		if err != nil {
			fmt.Fprintf(stderr, "gateway test: %s: %v\n", path, err)
			return exitFailure
		}
		if !res.OK() {
			code = exitFailure
		}
	}
	return code
}
