package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// problems collects configuration problems, each prefixed with its field
// path, so that one run reports all of them.
type problems []error

func (e *problems) add(path, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// duration parses a duration setting with ratelimit.ParseDuration (the
// parser of rates' windows, so "1d" is accepted wherever "1h" is);
// positive requires > 0, otherwise ≥ 0.
func duration(s, path string, positive bool, e *problems) time.Duration {
	d, err := ratelimit.ParseDuration(s)
	switch {
	case err != nil:
		if rest, neg := strings.CutPrefix(s, "-"); neg {
			if _, err := ratelimit.ParseDuration(rest); err == nil {
				if positive {
					e.add(path, "must be positive, got %s", s)
				} else {
					e.add(path, "must not be negative, got %s", s)
				}
				return 0
			}
		}
		e.add(path, "invalid duration %q (want e.g. \"50ms\", \"5s\", \"1m\", \"1d\")", s)
	case positive && d == 0:
		e.add(path, "must be positive, got %s", s)
	}
	return d
}
