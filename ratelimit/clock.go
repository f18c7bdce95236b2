package ratelimit

import "strconv"

// Clock selects whose clock decides: the store.clock setting, and the
// Redis store's option of the same name.
type Clock uint8

// The clocks.
const (
	// ClockLocal decides at the instant passed to Decide: the gateway's
	// own clock.
	ClockLocal Clock = iota + 1
	// ClockStore decides on the shared store's clock (Redis's TIME, read
	// inside the script at no extra round trip), one clock for a fleet.
	ClockStore
)

// String returns the configuration name of c ("local", "store").
func (c Clock) String() string {
	switch c {
	case ClockLocal:
		return "local"
	case ClockStore:
		return "store"
	}
	return "Clock(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText lets logs and JSON show the configuration name.
func (c Clock) MarshalText() ([]byte, error) { return []byte(c.String()), nil }
