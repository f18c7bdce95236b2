package upstream

import (
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func outlierPool(n int, o Outlier) (*Pool, *fakeClock) {
	w := make([]int, n)
	for i := range w {
		w[i] = 1
	}
	p := testPool(RoundRobin, w...)
	p.spec.Outlier = o
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p.now = c.now
	return p, c
}

// One target through a hand-computed table: 3 failures in a row eject
// it for 10s, then 20s, then 35s (max_ejection, not 40s); a success
// right after it returns keeps the streak, one base ejection (10s) after
// it returned resets it.
func TestOutlierEjectionTable(t *testing.T) {
	p, c := outlierPool(4, Outlier{ConsecutiveFailures: 3, BaseEjection: 10 * time.Second, MaxEjection: 35 * time.Second})
	a := p.Targets()[0]
	t0 := c.t
	steps := []struct {
		at      time.Duration // since t0
		do      string        // "F" failure, "S" success, "" look only
		ejected bool          // after the step
	}{
		{0, "F", false},
		{0, "F", false},
		{0, "S", false}, // a success ends the run
		{0, "F", false},
		{0, "F", false},
		{0, "F", true}, // 3 in a row: ejected until 10s
		{9999 * time.Millisecond, "", true},
		{10 * time.Second, "", false}, // back on time
		{10 * time.Second, "F", false},
		{10 * time.Second, "F", false},
		{10 * time.Second, "F", true}, // second in a row: 20s, until 30s
		{29 * time.Second, "", true},
		{30 * time.Second, "", false},
		{30 * time.Second, "F", false},
		{30 * time.Second, "F", false},
		{30 * time.Second, "F", true}, // third: 40s capped at 35s, until 65s
		{64 * time.Second, "", true},
		{65 * time.Second, "", false},
		{70 * time.Second, "S", false}, // 5s after returning: the streak stays
		{70 * time.Second, "F", false},
		{70 * time.Second, "F", false},
		{70 * time.Second, "F", true}, // fourth: 35s, until 105s
		{105 * time.Second, "", false},
		{115 * time.Second, "S", false}, // 10s after returning: the streak resets
		{115 * time.Second, "F", false},
		{115 * time.Second, "F", false},
		{115 * time.Second, "F", true}, // first again: 10s, until 125s
		{124 * time.Second, "", true},
		{125 * time.Second, "", false},
	}
	for i, s := range steps {
		c.t = t0.Add(s.at)
		switch s.do {
		case "F", "S":
			p.Begin(a)
			p.End(a, s.do == "F")
		}
		if got := !a.Healthy(); got != s.ejected {
			t.Fatalf("step %d (%v %q): ejected %v, want %v", i, s.at, s.do, got, s.ejected)
		}
	}
}

// At most half of a route's targets, rounded down, are ejected at once:
// none of 1, 1 of 2 or 3, 2 of 4; once one returns another may go.
func TestOutlierAtMostHalf(t *testing.T) {
	for n, most := range map[int]int{1: 0, 2: 1, 3: 1, 4: 2, 5: 2} {
		p, c := outlierPool(n, Outlier{ConsecutiveFailures: 1, BaseEjection: 10 * time.Second, MaxEjection: time.Minute})
		for _, x := range p.Targets() {
			p.Begin(x)
			p.End(x, true)
		}
		if got := n - p.Healthy(); got != most {
			t.Fatalf("%d targets all failing: %d ejected, want %d", n, got, most)
		}
		if most == 0 {
			continue
		}
		c.t = c.t.Add(10 * time.Second)
		last := p.Targets()[n-1]
		p.Begin(last)
		p.End(last, true)
		if last.Healthy() {
			t.Fatalf("%d targets: the last one is not ejected once the others returned", n)
		}
	}
}

// Passive health off (consecutive_failures = 0) ejects nothing.
func TestOutlierOff(t *testing.T) {
	p, _ := outlierPool(4, Outlier{})
	a := p.Targets()[0]
	for range 100 {
		p.Begin(a)
		p.End(a, true)
	}
	if !a.Healthy() || a.InFlight() != 0 {
		t.Fatalf("healthy %v, in flight %d", a.Healthy(), a.InFlight())
	}
}

func TestEjectionLength(t *testing.T) {
	for _, c := range []struct {
		base, max time.Duration
		k         int32
		want      time.Duration
	}{
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 6, 32 * time.Second},
		{time.Second, time.Minute, 7, time.Minute},
		{time.Second, time.Minute, 1 << 30, time.Minute}, // no overflow
		{time.Minute, time.Minute, 2, time.Minute},
	} {
		if got := ejection(c.base, c.max, c.k); got != c.want {
			t.Errorf("ejection(%v, %v, %d) = %v, want %v", c.base, c.max, c.k, got, c.want)
		}
	}
}

// An exchange that says nothing of the target (Release: the client went
// away, the route's timeout ended it) neither counts as a failure nor
// ends a run of them.
func TestOutlierRelease(t *testing.T) {
	p, _ := outlierPool(2, Outlier{ConsecutiveFailures: 2, BaseEjection: time.Second, MaxEjection: time.Second})
	a := p.Targets()[0]
	p.Begin(a)
	p.End(a, true)
	p.Begin(a)
	p.Release(a)
	if !a.Healthy() {
		t.Fatal("a released exchange counted as a failure")
	}
	p.Begin(a)
	p.End(a, true)
	if a.Healthy() || a.InFlight() != 0 {
		t.Fatalf("two failures around a released exchange: healthy %v, in flight %d", a.Healthy(), a.InFlight())
	}
}
