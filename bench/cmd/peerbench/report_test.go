package main

import (
	"testing"
	"time"
)

// TestRatios: every pair of peers is compared in each memory-store mode
// measured, and each Redis mode with the memory store's same mode; ratios
// hand-computed from CPU per request (1,000 requests a target).
func TestRatios(t *testing.T) {
	res := &results{}
	add := func(peer, mode string, cpuMicros int64) {
		for _, m := range allModes {
			if m.name == mode {
				res.targets = append(res.targets, &targetResult{
					t:      &target{peer: peer, m: m},
					rounds: []round{{wrk: wrkResult{requests: 1000}, proxyCPU: time.Duration(cpuMicros) * time.Millisecond}},
				})
				return
			}
		}
		t.Fatalf("no mode %q", mode)
	}
	add("tollgate", "allow-1key", 60)
	add("nginx", "allow-1key", 20)
	add("floor", "allow-1key", 50)
	add("base", "allow-1key", 55)
	add("tollgate", "deny-hot", 21)
	add("floor", "deny-hot", 15)
	add("tollgate", "redis-allow-1key", 90)
	want := "| comparison | CPU/req ratio | instr/req ratio | instr/req difference |\n|---|---:|---:|---:|\n" +
		"| tollgate / nginx, allow-1key | 3.00× | n/m | n/m |\n" +
		"| tollgate / floor, allow-1key | 1.20× | n/m | n/m |\n" +
		"| tollgate / floor, deny-hot | 1.40× | n/m | n/m |\n" +
		"| floor / nginx, allow-1key | 2.50× | n/m | n/m |\n" +
		"| base / floor, allow-1key | 1.10× | n/m | n/m |\n" +
		"| tollgate redis-allow-1key / tollgate allow-1key | 1.50× | n/m | n/m |\n"
	if got := ratios(res); got != want {
		t.Errorf("ratios:\n%s\nwant:\n%s", got, want)
	}
}
