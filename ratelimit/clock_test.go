package ratelimit

import "testing"

// TestClockNames: the configuration's names, and a readable value for
// anything else.
func TestClockNames(t *testing.T) {
	for c, want := range map[Clock]string{ClockLocal: "local", ClockStore: "store", 0: "Clock(0)", 9: "Clock(9)"} {
		if got := c.String(); got != want {
			t.Errorf("Clock(%d).String() = %q, want %q", c, got, want)
		}
		if b, _ := c.MarshalText(); string(b) != want {
			t.Errorf("Clock(%d).MarshalText() = %q, want %q", c, b, want)
		}
	}
}
