package policy

import (
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// UsageExport is the compiled [usage] table: where usage records and threshold
// notices are posted.
type UsageExport struct {
	// Sink is the URL as written, user info included (see Secret).
	Sink Secret
	// FlushInterval is the least time between two records of one key.
	FlushInterval time.Duration
	// Timeout bounds one post.
	Timeout time.Duration
	// MaxPending bounds the records held while the sink is behind.
	MaxPending int
	// BatchSize is the most records in one post.
	BatchSize int
}

// maxNotifyAt bounds limits[].notify_at: each fraction is a map lookup
// on the request path for a consumer past it.
const maxNotifyAt = 16

// buildUsage checks [usage]; nil when no sink is set.
func buildUsage(c *config.UsageConfig, e *problems) *UsageExport {
	if c.Sink == "" {
		return nil
	}
	u := &UsageExport{Sink: Secret(c.Sink.Reveal()), MaxPending: c.MaxPending, BatchSize: c.BatchSize}
	checkSink(c.Sink.Reveal(), e)
	u.FlushInterval = duration(c.FlushInterval, "usage.flush_interval", true, e)
	u.Timeout = duration(c.Timeout, "usage.timeout", true, e)
	if c.MaxPending < 1 || c.MaxPending > 10_000_000 {
		e.add("usage.max_pending", "must be in 1..10000000, got %d", c.MaxPending)
	}
	if c.BatchSize < 1 || c.BatchSize > 10_000 {
		e.add("usage.batch_size", "must be in 1..10000, got %d", c.BatchSize)
	}
	return u
}

// checkSink checks the sink's URL without repeating it (it may hold a
// password).
func checkSink(s string, e *problems) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		e.add("usage.sink", "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		e.add("usage.sink", "scheme %q: want http or https", u.Scheme)
	case u.Hostname() == "":
		e.add("usage.sink", "no host")
	case u.Fragment != "" || u.RawFragment != "":
		e.add("usage.sink", "a fragment is never sent; remove it")
	}
}

// buildNotifyAt checks a limit's notify_at: fractions in (0, 1],
// ascending, on a limit with windows, with a sink to post to.
func buildNotifyAt(l *Limit, fs []float64, usage *UsageExport, path string, e *problems) {
	if len(fs) == 0 {
		return
	}
	path += ".notify_at"
	switch {
	case usage == nil:
		e.add(path, "set, but usage.sink is not: notices need a sink")
		return
	case l.Limit != nil && l.Algorithm == ratelimit.Concurrency:
		e.add(path, "does not apply to the concurrency algorithm (it holds no usage over a period)")
		return
	case len(fs) > maxNotifyAt:
		e.add(path, "at most %d fractions, got %d", maxNotifyAt, len(fs))
		return
	}
	for i, f := range fs {
		switch {
		case math.IsNaN(f) || f <= 0 || f > 1:
			e.add(fmt.Sprintf("%s[%d]", path, i), "must be a fraction in (0, 1], got %v", f)
			return
		case i > 0 && f <= fs[i-1]:
			e.add(fmt.Sprintf("%s[%d]", path, i), "must be above the one before (%v), got %v", fs[i-1], f)
			return
		}
	}
	l.NotifyAt = append([]float64(nil), fs...)
}

// NotifyAt returns the notify_at fractions of every limit that has them,
// by limit name.
func (p *Policy) NotifyAt() map[string][]float64 {
	m := map[string][]float64{}
	for _, l := range p.Limits {
		if len(l.NotifyAt) > 0 && l.Limit != nil {
			m[l.Name] = l.NotifyAt
		}
	}
	return m
}
