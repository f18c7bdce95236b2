package ratelimit

import "math"

// Packing of one sliding-log entry into a uint64: the timestamp's offset
// from LogState.base in the high 46 bits (2^46 ticks ≈ 814 days, more than
// twice MaxWindow) and count−1 in the low 18 bits, so one entry holds a run
// of up to 2^18 units logged at the same tick.
const (
	logRunBits   = 18
	logMaxRun    = 1 << logRunBits
	logMaxOffset = 1<<(64-logRunBits) - 1
)

// LogState is the state of a sliding_window_log window: the timestamps of
// the counted units, oldest first, in a ring of packed (timestamp, count)
// runs. Each entry is 8 bytes and holds at least one unit, and the ring
// never holds more than L entries, so the state costs at most 8 bytes per
// logged unit plus a 48-byte header. The zero value is an empty log.
type LogState struct {
	base  int64    // timestamp that entry offsets are relative to
	units int64    // units in the ring
	head  int      // index of the oldest entry
	n     int      // entries in the ring
	ring  []uint64 // packed entries, len(ring) is the capacity
}

var _ Window = (*LogState)(nil)

// entry returns the timestamp and unit count of the k-th oldest entry.
func (s *LogState) entry(k int) (ts, count int64) {
	e := s.ring[(s.head+k)%len(s.ring)]
	return s.base + int64(e>>logRunBits), int64(e&(logMaxRun-1)) + 1
}

// Init implements Window: an empty log (the ring's memory is kept).
func (s *LogState) Init(*Params, int64) {
	s.base, s.units, s.head, s.n = 0, 0, 0, 0
}

// expired returns the number of oldest entries, and the units they hold,
// whose timestamps are ≤ cut (no longer counting).
func (s *LogState) expired(cut int64) (entries int, units int64) {
	for entries < s.n {
		ts, c := s.entry(entries)
		if ts > cut {
			break
		}
		entries++
		units += c
	}
	return entries, units
}

// Allow implements Window. A unit logged at ts counts at now iff
// ts > now − W; with n counting units, cost c is allowed iff n + c ≤ L,
// else RetryAfter = ts_k + W − now for the k-th oldest counting unit,
// k = n + c − L.
func (s *LogState) Allow(p *Params, now, cost int64) (bool, int64) {
	first, gone := s.expired(now - p.Window)
	n := s.units - gone
	if n+cost <= p.Limit {
		return true, 0
	}
	k := n + cost - p.Limit
	var seen int64
	for e := first; e < s.n; e++ {
		ts, c := s.entry(e)
		seen += c
		if seen >= k {
			return false, ts + p.Window - now
		}
	}
	// Unreachable for cost ≤ L: k ≤ n.
	return false, p.Window
}

// Take implements Window: drop the units that no longer count, then log
// cost units at max(now, newest logged timestamp) so the log stays sorted
// when the clock steps back (a unit is never logged as older than one
// already counted).
func (s *LogState) Take(p *Params, now, cost int64) {
	drop, units := s.expired(now - p.Window)
	if drop > 0 {
		s.head = (s.head + drop) % len(s.ring)
		s.n -= drop
		s.units -= units
	}
	ts := now
	if s.n > 0 {
		last := (s.head + s.n - 1) % len(s.ring)
		lts, lc := s.entry(s.n - 1)
		if lts >= ts {
			ts = lts
			if lc < logMaxRun {
				add := min(cost, logMaxRun-lc)
				s.ring[last] += uint64(add)
				s.units += add
				cost -= add
			}
		}
	}
	for cost > 0 {
		c := min(cost, logMaxRun)
		s.push(p, ts, c)
		cost -= c
	}
}

// push appends a new entry of c units at ts ≥ every logged timestamp.
func (s *LogState) push(p *Params, ts, c int64) {
	if s.n == 0 {
		s.base, s.head = ts, 0
	}
	for ts-s.base > logMaxOffset {
		// Rebase on the oldest entry. After pruning every entry is younger
		// than W ≤ MaxWindow, so this loop runs once and drops nothing.
		oldest, _ := s.entry(0)
		if ts-oldest > logMaxOffset {
			_, dc := s.entry(0)
			s.head = (s.head + 1) % len(s.ring)
			s.n--
			s.units -= dc
			if s.n == 0 {
				s.base = ts
			}
			continue
		}
		delta := uint64(oldest-s.base) << logRunBits
		for k := 0; k < s.n; k++ {
			s.ring[(s.head+k)%len(s.ring)] -= delta
		}
		s.base = oldest
	}
	if s.n == len(s.ring) {
		s.grow(p.Limit)
	}
	s.ring[(s.head+s.n)%len(s.ring)] = uint64(ts-s.base)<<logRunBits | uint64(c-1)
	s.n++
	s.units += c
}

// grow doubles the ring (at least 4 entries, at most limit, always one more
// than now), moving the entries to the front.
func (s *LogState) grow(limit int64) {
	size := max(2*len(s.ring), 4)
	if int64(size) > limit {
		size = int(min(limit, math.MaxInt32))
	}
	size = max(size, s.n+1)
	ring := make([]uint64, size)
	for k := 0; k < s.n; k++ {
		ring[k] = s.ring[(s.head+k)%len(s.ring)]
	}
	s.ring, s.head = ring, 0
}

// Remaining implements Window: L − n.
func (s *LogState) Remaining(p *Params, now int64) int64 {
	_, gone := s.expired(now - p.Window)
	return clamp(p.Limit-(s.units-gone), 0, p.Capacity)
}

// Expiry implements Window: the newest timestamp + W.
func (s *LogState) Expiry(p *Params) int64 {
	if s.n == 0 {
		return math.MinInt64
	}
	ts, _ := s.entry(s.n - 1)
	return ts + p.Window
}

// Units returns the number of units held in the log, counting or not yet
// dropped.
func (s *LogState) Units() int64 { return s.units }

// Bytes returns the memory the log's ring holds, in bytes.
func (s *LogState) Bytes() int { return 8 * len(s.ring) }
