package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

// TestKeyRotationPlateau is keyrot's CI mode: 200,000 distinct keys
// against max_keys = 20,000 within 30 s. It fails when the live-key gauge
// passes max_keys or RSS keeps growing once the store is full (see
// plateau); throughput is reported, not asserted.
func TestKeyRotationPlateau(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s load run; run without -short")
	}
	root, err := probe.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const maxKeys = 20_000
	res, err := run(ctx, options{Keys: 200_000, MaxKeys: maxKeys, Workers: 16, Interval: time.Second,
		Timeout: 30 * time.Second, Root: root, Log: &log})
	if err != nil {
		t.Fatalf("keyrot: %v\n%s", err, log.String())
	}
	for _, p := range plateau(res, maxKeys) {
		t.Error(p)
	}
	if res.Non200 > 0 || res.Errors > 0 {
		t.Errorf("%d non-200, %d errors (first: %s)", res.Non200, res.Errors, res.FirstErr)
	}
	if last := res.Rows[len(res.Rows)-1]; last.LiveKeys < maxKeys/2 {
		t.Errorf("live-key gauge %.0f after %d keys: the store never filled (max_keys %d)", last.LiveKeys, res.Sent, maxKeys)
	}
	med, low := throughput(res)
	t.Logf("%d keys in %.1fs, median %.0f req/s, min %.0f req/s", res.Sent, res.Elapsed.Seconds(), med, low)
	if t.Failed() {
		t.Logf("keyrot log:\n%s", log.String())
	}
}

// TestPlateauCatchesLinearGrowth: plateau fails RSS that grows with every
// key and passes RSS that stops once the store is full.
func TestPlateauCatchesLinearGrowth(t *testing.T) {
	mk := func(perKeyAfter int64) *result {
		res := &result{Rows: []row{{RSS: 20 << 20}}}
		for i := int64(1); i <= 20; i++ {
			sent := i * 10_000
			rss := int64(20<<20) + min(sent, 20_000)*400 + max(0, sent-20_000)*perKeyAfter
			res.Rows = append(res.Rows, row{Sent: sent, RSS: rss, LiveKeys: float64(min(sent, 20_000))})
		}
		return res
	}
	if p := plateau(mk(0), 20_000); len(p) != 0 {
		t.Errorf("plateau judged growing: %v", p)
	}
	if p := plateau(mk(400), 20_000); len(p) == 0 {
		t.Error("linear growth of 400 B/key judged a plateau")
	}
}

// TestPlateauSlowSecondHalf: when a loaded machine sends only a few
// thousand keys in the second half, the collector's drift in RSS is not
// judged as growth per key; the absolute bound still catches a leak.
func TestPlateauSlowSecondHalf(t *testing.T) {
	res := &result{Rows: []row{{RSS: 20 << 20}}}
	sent := int64(0)
	for i := 1; i <= 20; i++ {
		step := int64(10_000)
		if i > 12 {
			step = 1_000 // throughput collapsed
		}
		sent += step
		rss := int64(20<<20) + min(sent, 20_000)*400
		if i > 12 {
			rss += int64(i-12) * 300 << 10 // GC timing, not keys
		}
		res.Rows = append(res.Rows, row{Sent: sent, RSS: rss, LiveKeys: float64(min(sent, 20_000))})
	}
	if p := plateau(res, 20_000); len(p) != 0 {
		t.Errorf("drift over a slow second half judged as growth: %v", p)
	}
	res.Rows[len(res.Rows)-1].RSS += 64 << 20
	if p := plateau(res, 20_000); len(p) == 0 {
		t.Error("a 64 MiB jump passed")
	}
}
