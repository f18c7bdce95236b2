// Package logthrottle holds back repeated log lines: one line per Every
// about one thing, and a count of the ones held back, so that a failure
// seen on every request (or every background retry) shows in the log
// without flooding it under exactly the conditions that cause it.
package logthrottle

import (
	"sync/atomic"
	"time"
)

// Every is the least time between two log lines about one thing.
const Every = time.Second

// Throttle lets one log line through per Every and counts the ones it
// held back. It is safe for concurrent use; the zero value is ready.
type Throttle struct {
	last       atomic.Int64 // unix nanoseconds of the last line
	suppressed atomic.Int64 // events not logged since
}

// Allow reports whether a line may be written at now and, if so, how many
// events were held back since the last line.
func (t *Throttle) Allow(now time.Time) (suppressed int64, ok bool) {
	last := t.last.Load()
	if now.UnixNano()-last < int64(Every) || !t.last.CompareAndSwap(last, now.UnixNano()) {
		t.suppressed.Add(1)
		return 0, false
	}
	return t.suppressed.Swap(0), true
}
