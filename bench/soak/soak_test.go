package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

// TestSoakShort is the soak's CI mode: 30 s of the full traffic mix at a
// modest rate with a reload every 2 s, sampled every 2 s. It fails when a
// resource keeps growing, when the gateway is not back to its idle
// goroutines and fds after the traffic, or when any request had an outcome
// other than its kind's. The CSV and PNG go to the test's temp directory
// (the published curve comes from `go run ./bench/soak`).
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s soak; run without -short")
	}
	root, err := probe.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := run(ctx, options{
		Duration: 30 * time.Second, Interval: 2 * time.Second, ReloadEvery: 2 * time.Second,
		RPS: 400, Workers: 8, Keys: 1000, Root: root, Out: out, Log: &log,
		SettleWithin: 15 * time.Second,
	})
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, log.String())
	}
	for _, p := range verdict(rep) {
		t.Error(p)
	}
	for _, f := range []string{"soak.csv", "soak.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if t.Failed() {
		t.Logf("soak log:\n%s", log.String())
	}
}

// TestFlatnessCatchesGrowth: the verdict fails a run whose goroutines grow
// linearly, and passes a flat one.
func TestFlatnessCatchesGrowth(t *testing.T) {
	mk := func(grow int) *report {
		rep := &report{}
		for i := range 20 {
			r := row{Elapsed: time.Duration(i) * time.Second}
			r.Goroutines = 50 + grow*i
			r.FDs, r.HeapInuse, r.RSS = 30, 4<<20, 30<<20
			rep.Rows = append(rep.Rows, r)
		}
		rep.Before.Goroutines, rep.Before.FDs = 6, 12
		rep.After.Goroutines, rep.After.FDs = 6+grow, 12
		return rep
	}
	if p := flatness(mk(0)); len(p) != 0 {
		t.Errorf("flat run judged growing: %v", p)
	}
	p := flatness(mk(10))
	if len(p) != 2 || !strings.Contains(p[0], "goroutines grows") || !strings.Contains(p[1], "idle again") {
		t.Errorf("growing run: got %q, want goroutine growth and no return to idle", p)
	}
}
