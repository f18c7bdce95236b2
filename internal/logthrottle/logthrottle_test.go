package logthrottle

import (
	"testing"
	"time"
)

// TestThrottleSteps walks a Throttle at fake instants: the first event
// passes, the next ones within Every are held back and counted, and the
// first event Every after the last line passes with that count.
func TestThrottleSteps(t *testing.T) {
	var th Throttle
	t0 := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	for i, st := range []struct {
		at         time.Duration
		ok         bool
		suppressed int64
	}{
		{0, true, 0},
		{100 * time.Millisecond, false, 0},
		{999 * time.Millisecond, false, 0},
		{time.Second, true, 2},
		{1500 * time.Millisecond, false, 0},
		{5 * time.Second, true, 1},
		{6 * time.Second, true, 0},
	} {
		n, ok := th.Allow(t0.Add(st.at))
		if ok != st.ok || n != st.suppressed {
			t.Errorf("step %d: Allow(t0+%v) = %d, %v; want %d, %v", i, st.at, n, ok, st.suppressed, st.ok)
		}
	}
}
