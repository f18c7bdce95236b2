package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is Limit units per Window.
type Rate struct {
	// Limit is the number of units allowed per window, in 1..MaxLimit.
	Limit int64
	// Window is the window length, a positive whole number of ticks no
	// longer than MaxWindow.
	Window time.Duration
}

// ParseRate parses the configuration's rate syntax (README, "Configuration
// reference"): "N/second|minute|hour|day|week|month", the short units
// "s m h d", and "N/<duration>" such as "5/10s" or "1000/1h30m". A week
// is 7 days and a month 31 days (MonthWindow): the quota algorithm reads
// those windows, and a day's, as calendar periods.
// N and the window must be positive.
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want N/window, e.g. \"10/second\"", s)
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: count %q is not an integer", s, n)
	}
	unit = strings.TrimSpace(unit)
	var w time.Duration
	switch unit {
	case "second", "s", "sec":
		w = time.Second
	case "minute", "m", "min":
		w = time.Minute
	case "hour", "h":
		w = time.Hour
	case "day", "d":
		w = dayWindow
	case "week":
		w = weekWindow
	case "month":
		w = monthWindow
	default:
		w, err = parseWindow(unit)
		if err != nil {
			return Rate{}, fmt.Errorf("rate %q: %w", s, err)
		}
	}
	r := Rate{Limit: limit, Window: w}
	if err := r.Validate(); err != nil {
		return Rate{}, fmt.Errorf("rate %q: %w", s, err)
	}
	return r, nil
}

// parseWindow parses a rate's window with ParseDuration, naming the
// spellings a window may take when it fails.
func parseWindow(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("missing window")
	}
	d, err := ParseDuration(s)
	if err != nil {
		if errors.Is(err, errDurationTooLong) {
			return 0, fmt.Errorf("window %q exceeds %s", s, MaxWindow)
		}
		return 0, fmt.Errorf("unknown window %q (use second, minute, hour, day or a duration like 10s, 1h30m)", s)
	}
	return d, nil
}

var errDurationTooLong = errors.New("duration too long")

// ParseDuration parses a non-negative duration the way configurations
// write one: a Go duration ("50ms", "1h30m") that may start with a whole
// number of days ("1d", "2d12h"; a day is 24 hours, at most MaxWindow's
// worth). Rates' windows and every duration setting use it, so that
// whatever one accepts the other does too. A sign is not accepted.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || s[0] < '0' || s[0] > '9' {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		if n > int64(MaxWindow/(24*time.Hour)) {
			return 0, fmt.Errorf("%w: %q exceeds %s", errDurationTooLong, s, MaxWindow)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	if s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if d > math.MaxInt64-days {
		return 0, fmt.Errorf("%w: %q", errDurationTooLong, s)
	}
	return days + d, nil
}

// Validate reports whether r is usable: 1 ≤ Limit ≤ MaxLimit and
// 0 < Window ≤ MaxWindow in whole ticks.
func (r Rate) Validate() error {
	if r.Limit <= 0 {
		return fmt.Errorf("count must be positive, got %d", r.Limit)
	}
	if r.Limit > MaxLimit {
		return fmt.Errorf("count %d exceeds 2^53", r.Limit)
	}
	if r.Window <= 0 {
		return fmt.Errorf("window must be positive, got %s", r.Window)
	}
	if r.Window > MaxWindow {
		return fmt.Errorf("window %s exceeds %s", r.Window, MaxWindow)
	}
	if r.Window%Tick != 0 {
		return fmt.Errorf("window %s is not a whole number of microseconds", r.Window)
	}
	return nil
}

// String formats r as "N/<window>", e.g. "10/1s"; ParseRate accepts it.
func (r Rate) String() string {
	return strconv.FormatInt(r.Limit, 10) + "/" + r.Window.String()
}

// Seconds returns the window in whole seconds, rounded up (at least 1).
func (r Rate) Seconds() int64 {
	s := int64((r.Window + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}
