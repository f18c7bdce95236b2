package policy

import (
	"fmt"
	"time"
)

// problems collects configuration problems, each prefixed with its field
// path, so that one run reports all of them.
type problems []error

func (e *problems) add(path, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// duration parses a Go duration string; positive requires > 0, otherwise ≥ 0.
func duration(s, path string, positive bool, e *problems) time.Duration {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		e.add(path, "invalid duration %q (want e.g. \"50ms\", \"5s\", \"1m\")", s)
	case d < 0 || positive && d == 0:
		if positive {
			e.add(path, "must be positive, got %s", s)
		} else {
			e.add(path, "must not be negative, got %s", s)
		}
	}
	return d
}
