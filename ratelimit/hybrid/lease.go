package hybrid

import (
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

type leaseKey struct{ id, key string }

// lease is one gateway's slice of one key's budget, or its cached denial.
// Instants are ticks (µs) on the clock of the Decide calls, but counted and
// prevCounted, on the store's.
type lease struct {
	lim   *ratelimit.Limit // the limit it was taken for (a reload replaces it)
	units int64            // units left to admit locally
	until int64            // the instant the units stop being admissible
	size  int64            // the size of the last lease taken
	used  int64            // units admitted since the last lease was taken
	// The store's report when the lease was taken at instant at: what it
	// had left beyond the lease, and its reset. counted is the instant
	// the store counted the lease at, on its clock (Decision.At; at when
	// the store decides on the caller's clock): the give-back names the
	// window or bucket of counted, while at ages the lease here.
	remaining, capacity int64
	reset               time.Duration
	at, counted         int64
	// gen counts the leases settled into l: a unit reserved from one
	// lease and given back after the next was settled (its request
	// denied) must not join the next one's units.
	gen uint64
	// When a lease was taken while earlier ones still held units, prev
	// is how many they held, counted at prevAt (prevCounted on the
	// store's clock) or later; a give-back returns up to prev units at
	// prevCounted, the rest at counted.
	prev, prevAt, prevCounted int64
	// A denial of the hit at its own cost, repeated locally until
	// denyUntil.
	denyUntil, deniedAt int64
	deny                ratelimit.Decision
	// pending, while a request's store call takes a lease for the key,
	// is closed when it is settled: the key's other requests wait for it
	// instead of each asking the store (a burst on a hot key would
	// otherwise send one call per request until the first lease lands).
	pending chan struct{}
}

// stepSlack is how far before the instant a lease or denial was taken a
// request's instant may be without the clock counting as stepped back
// (when the interval is shorter): a request carries the instant it
// started at, and may have waited for a lease call or the CPU since.
const stepSlack = time.Second

// steppedBack reports whether t is more than an interval (at least
// stepSlack) before the instant l's lease or denial was taken: the clock
// of the Decide calls (the gateway's wall clock) stepped back. Leases and
// denials age on that clock, so without this a step back of an hour would
// repeat a denial (or admit from a lease whose window the store has
// closed) for an hour, while the store, on its own clock, has long moved
// on. A smaller step extends a lease or a denial by at most the slack.
func (l *lease) steppedBack(t int64) bool {
	return t < max(l.at, l.deniedAt)-int64(max(l.lim.Batch.Interval, stepSlack)/ratelimit.Tick)
}

// takeBack ends l at t and removes its unused units, returning them as
// hits of the lease's limit to give back with the instants they were
// counted. Units held from an earlier lease (prev) go back to that
// lease's instant first: whichever units were admitted, each was counted
// at one of the two instants, and no bucket gets back more of this
// gateway's units than it counted. Nothing is returned when there is
// nothing worth a call: a fixed window that has ended (the store has
// dropped it and takes nothing back into a later one), a sliding
// counter's bucket that has left the window. Whether it has is judged on
// this gateway's clock (at, prevAt against t); the units go back to the
// instants the store counted them at (counted, prevCounted), on its
// clock, which decides again whether the window or bucket still holds
// them. The shard lock is held.
func (l *lease) takeBack(key string, t int64) []giveBack {
	n := l.units
	if n <= 0 {
		return nil
	}
	l.units = 0
	l.until = min(l.until, t)
	var out []giveBack
	add := func(c, at, counted int64) {
		live := t < at+int64(l.lim.Rates[0].Window/ratelimit.Tick)
		if l.lim.Algorithm == ratelimit.FixedWindow {
			// l.reset is the store's reset reported for the lease at
			// l.at; a merged earlier lease is in the same window.
			live = t < l.at+int64(l.reset/ratelimit.Tick)
		}
		if c > 0 && live {
			out = append(out, giveBack{ratelimit.Hit{Limit: l.lim, Key: key, Cost: c}, counted})
		}
	}
	old := min(n, l.prev)
	add(old, l.prevAt, l.prevCounted)
	add(n-old, l.at, l.counted)
	l.prev = 0
	return out
}

// report is the decision of a hit admitted from l (counted) or of a
// locally admissible hit of a denied request (not counted).
func (l *lease) report(h ratelimit.Hit, t int64, counted bool) ratelimit.Decision {
	el := time.Duration(t-l.at) * ratelimit.Tick
	d := ratelimit.Decision{Allowed: true, Counted: counted, Limit: l.capacity,
		Remaining: min(l.capacity, l.remaining+l.units), Reset: max(0, l.reset-el)}
	if counted {
		// The units were counted by the store with the lease (or an
		// older one still held, whose instant is in the same window
		// and no newer bucket): a settled reservation gives back there
		// (ratelimit.Settler).
		d.At = l.counted
		if l.prev > 0 {
			d.At = l.prevCounted
		}
	}
	return d
}

// denial is the cached denial as seen at t.
func (l *lease) denial(t int64) ratelimit.Decision {
	d := l.deny
	el := time.Duration(t-l.deniedAt) * ratelimit.Tick
	d.RetryAfter = max(ratelimit.Tick, d.RetryAfter-el)
	d.Reset = min(max(0, d.Reset-el), d.RetryAfter)
	return d
}
