package window

import (
	"math"

	"github.com/tollgate/gateway/ratelimit"
)

// logEntryBytes is the memory one sliding-log entry takes: its timestamp
// and its unit count, 8 bytes each.
const logEntryBytes = 16

// logEntry is a run of units logged at one tick. units is as wide as any
// cost (MaxLimit), so one request adds at most one entry however large its
// cost: no state grows with a request's cost.
type logEntry struct {
	ts, units int64
}

// LogState is the state of a sliding_window_log window: the timestamps of
// the counted units, oldest first, in a ring of (timestamp, units) entries,
// one per tick that counted. Each entry holds at least one unit and the
// units held never exceed L after a count, so the ring never holds more
// than L entries: at most logEntryBytes per unit of the limit plus a
// 48-byte header (see Limit.StateBytes). The zero value is an empty log.
type LogState struct {
	units int64      // units in the ring
	head  int        // index of the oldest entry
	n     int        // entries in the ring
	ring  []logEntry // len(ring) is the capacity
}

var _ State = (*LogState)(nil)

// entry returns the k-th oldest entry.
func (s *LogState) entry(k int) *logEntry {
	k += s.head
	if k >= len(s.ring) {
		k -= len(s.ring)
	}
	return &s.ring[k]
}

// Init implements State: an empty log (the ring's memory is kept).
func (s *LogState) Init(*ratelimit.Params, int64) {
	s.units, s.head, s.n = 0, 0, 0
}

// expired returns the number of oldest entries, and the units they hold,
// whose timestamps are ≤ cut (no longer counting).
func (s *LogState) expired(cut int64) (entries int, units int64) {
	for entries < s.n {
		e := s.entry(entries)
		if e.ts > cut {
			break
		}
		entries++
		units += e.units
	}
	return entries, units
}

// allow implements State. A unit logged at ts counts at now iff
// ts > now − W; with n counting units, cost c is allowed iff n + c ≤ L,
// else RetryAfter = ts_k + W − now for the k-th oldest counting unit,
// k = n + c − L.
func (s *LogState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	first, gone := s.expired(now - p.Window)
	n := s.units - gone
	if n+cost <= p.Limit {
		return true, 0
	}
	k := n + cost - p.Limit
	var seen int64
	for i := first; i < s.n; i++ {
		e := s.entry(i)
		seen += e.units
		if seen >= k {
			return false, e.ts + p.Window - now
		}
	}
	// Unreachable for cost ≤ L: k ≤ n.
	return false, p.Window
}

// take implements State: drop the units that no longer count, then log
// cost units at max(now, newest logged timestamp) so the log stays sorted
// when the clock steps back (a unit is never logged as older than one
// already counted). Units logged at the newest entry's tick join it.
func (s *LogState) take(p *ratelimit.Params, now, cost int64) {
	drop, units := s.expired(now - p.Window)
	if drop > 0 {
		s.head = (s.head + drop) % len(s.ring)
		s.n -= drop
		s.units -= units
	}
	s.units += cost
	if s.n > 0 {
		if last := s.entry(s.n - 1); last.ts >= now {
			last.units += cost
			return
		}
	}
	if s.n == len(s.ring) {
		s.grow(p.Limit)
	}
	*s.entry(s.n) = logEntry{ts: now, units: cost}
	s.n++
}

// grow doubles the ring (at least 2 entries, since most keys of a log
// keyed by client see a request or two; at most limit; always one more
// than now), moving the entries to the front.
func (s *LogState) grow(limit int64) {
	size := max(2*len(s.ring), 2)
	if int64(size) > limit {
		size = int(min(limit, math.MaxInt32))
	}
	size = max(size, s.n+1)
	ring := make([]logEntry, size)
	for k := 0; k < s.n; k++ {
		ring[k] = *s.entry(k)
	}
	s.ring, s.head = ring, 0
}

// remaining implements State: L − n.
func (s *LogState) remaining(p *ratelimit.Params, now int64) int64 {
	_, gone := s.expired(now - p.Window)
	return clamp(p.Limit-(s.units-gone), 0, p.Capacity)
}

// Expiry implements State: the newest timestamp + W.
func (s *LogState) Expiry(p *ratelimit.Params) int64 {
	if s.n == 0 {
		return math.MinInt64
	}
	return s.entry(s.n-1).ts + p.Window
}

// Units returns the number of units held in the log, counting or not yet
// dropped.
func (s *LogState) Units() int64 { return s.units }

// Bytes returns the memory the log's ring holds, in bytes.
func (s *LogState) Bytes() int { return logEntryBytes * len(s.ring) }
