package limittest

import (
	"fmt"
	"io"
	"slices"
)

// Write prints the result the way a CI log reads it: every failing step
// with its differences, then one summary line.
func (r *Result) Write(w io.Writer) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	for _, n := range r.Passed {
		p("ok   %q\n", n)
	}
	for _, f := range r.Failures {
		p("FAIL %q step %d (at %s, %s):\n", f.Case, f.Step+1, f.At, f.Request)
		for _, d := range f.Diffs {
			p("    %s\n", d)
		}
	}
	status := "PASS"
	if !r.OK() {
		status = "FAIL"
	}
	p("%s: %d cases, %d passed, %d failing steps, %d requests\n", status, r.Cases, len(r.Passed), len(r.Failures), r.Requests)
	return err
}

// sortedKeys returns m's keys in order, so that reports are stable.
func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
