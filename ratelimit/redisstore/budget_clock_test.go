package redisstore

import (
	"testing"
	"time"
	"unsafe"
)

// wallShifted returns t with its wall-clock reading moved by d and its
// monotonic reading kept: the deadline a call computed before the
// machine's wall clock was stepped by -d (NTP, an operator, a VM
// resumed), as it looks after the step.
func wallShifted(t time.Time, d time.Duration) time.Time {
	type rawTime struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	const hasMonotonic, nsecShift = 1 << 63, 30
	r := (*rawTime)(unsafe.Pointer(&t))
	if r.wall&hasMonotonic == 0 {
		panic("no monotonic reading")
	}
	r.wall += uint64(d/time.Second) << nsecShift
	return t
}

// TestBudgetWallClockStep: a budget's Done closes about one grain after
// its deadline whatever the wall clock does meanwhile. Before, the
// grains were counted in wall-clock nanoseconds (UnixNano) and the timer
// re-armed for the wall-clock instant: after a step back of an hour,
// every Done channel of the calls in flight stayed open for that hour (a
// call queued in the coalescer or waiting for a dial hung with it), and
// a step forward closed them at once. This runs no clock change: the
// deadlines carry the wall reading they would have after the step.
func TestBudgetWallClockStep(t *testing.T) {
	const budget = 40 * time.Millisecond
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		var c budgetClock
		c.init(budget)
		at := time.Now().Add(budget)
		ch := c.doneAt(wallShifted(at, step))
		if step < 0 {
			// A step forward: nothing may close before the deadline.
			// (Both cases may be ready when this goroutine runs late: only a
			// Done seen closed before the deadline fails.)
			select {
			case <-ch:
				if early := time.Until(at); early > 0 {
					t.Fatalf("wall step %v: Done closed %v before its deadline", -step, early)
				}
			case <-time.After(time.Until(at)):
			}
		}
		select {
		case <-ch:
		case <-time.After(20 * budget):
			t.Fatalf("wall step %v: Done still open %v after its deadline", -step, 20*budget)
		}
	}
}
