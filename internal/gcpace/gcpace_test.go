package gcpace

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// TestPercent checks the GOGC for a minimum heap against hand-computed
// goals: Go's goal is live + (live + roots) * GOGC / 100.
func TestPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name             string
		min, live, roots int64
		want             int
	}{
		{"off", 0, 2 * mib, 0, 100},
		{"negative", -1, 2 * mib, 0, 100},
		// 1 MiB live, no roots: the 4 MiB minimum times 8 is 32 MiB,
		// while 1 + 1*8 = 9 MiB is below it.
		{"small heap", 32 * mib, mib, 0, 800},
		{"roots count little", 32 * mib, mib, mib, 800},
		// 3 MiB live, 3 MiB roots: 3 + 6*p/100 = 32 → p = 483 (the
		// minimum heap, 4*4.83 = 19 MiB, is below it).
		{"roots", 32 * mib, 3 * mib, 3 * mib, 483},
		// 16 MiB live: Go's goal is 32 MiB already.
		{"at the minimum", 32 * mib, 16 * mib, 0, 100},
		{"above the minimum", 32 * mib, 100 * mib, 0, 100},
		// 10 MiB live: 10 + 10*p/100 = 32 → p = 220.
		{"between", 32 * mib, 10 * mib, 0, 220},
		{"nothing live", 32 * mib, 0, 0, 800},
		// 6 MiB: 4 MiB * 1.5.
		{"not a multiple of 4 MiB", 6 * mib, 0, 0, 150},
		{"below Go's minimum", 2 * mib, 0, 0, 100},
		{"huge", 1 << 40, 1, 0, maxPercent},
	}
	for _, tc := range tests {
		if got := Percent(tc.min, tc.live, tc.roots); got != tc.want {
			t.Errorf("%s: Percent(%d, %d, %d) = %d, want %d", tc.name, tc.min, tc.live, tc.roots, got, tc.want)
		}
	}
}

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestPacer: the goal the runtime reports follows the minimum heap after
// collections, a Set applies at once, and Stop gives Go's pacing back.
func TestPacer(t *testing.T) {
	const min = 64 << 20
	runtime.GC()
	p := Start(min)
	defer p.Stop()
	// Live data must survive while we look: a few MiB, as a gateway has.
	keep := make([][]byte, 0, 256)
	for range 256 {
		keep = append(keep, make([]byte, 8<<10))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the cleanup runs after the cycle
		goal := readMetric("/gc/heap/goal:bytes")
		if goal >= min*9/10 && goal <= min*11/10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heap goal %d MiB after collections, want about %d MiB (GOGC %d)",
				goal>>20, min>>20, readMetric("/gc/gogc:percent"))
		}
	}
	p.Set(0)
	if pct := readMetric("/gc/gogc:percent"); pct != 100 {
		t.Fatalf("GOGC %d after Set(0), want 100", pct)
	}
	p.Set(min)
	if pct := readMetric("/gc/gogc:percent"); pct <= 100 {
		t.Fatalf("GOGC %d after Set(%d), want more than 100", pct, min)
	}
	p.Stop()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if pct := readMetric("/gc/gogc:percent"); pct != 100 {
		t.Fatalf("GOGC %d after Stop and a collection, want 100", pct)
	}
	runtime.KeepAlive(keep)
}
