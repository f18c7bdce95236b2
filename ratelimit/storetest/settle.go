package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// settleStep is one step of a settle table: at at, count cost units
// (reserve), or (back) give back cost units counted at from; then the
// first window's Remaining must be want.
type settleStep struct {
	at, from time.Duration
	back     bool
	cost     int64
	want     int64
}

// RunSettle checks ratelimit.Settler on hand-computed tables, one per
// algorithm that settles: a reservation's unused units come back to the
// window that counted them (never to another, never above the capacity
// or below zero), and the algorithms that cannot settle are left alone.
func RunSettle(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	s := &suite{newStore: newStore, tag: "{st}"}
	for _, c := range []struct {
		name  string
		alg   ratelimit.Algorithm
		rate  string
		steps []settleStep
	}{
		{"FixedWindow", ratelimit.FixedWindow, "10/1s", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 7},
			{at: ms(20), back: true, from: ms(0), cost: 9, want: 10}, // never below zero
			{at: ms(30), cost: 6, want: 4},
			{at: ms(40), back: true, from: -ms(500), cost: 6, want: 4},  // another window
			{at: ms(1010), back: true, from: ms(30), cost: 6, want: 10}, // that window has ended
		}},
		{"SlidingLog", ratelimit.SlidingWindowLog, "10/1s", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 7},
			{at: ms(20), cost: 4, want: 3},
			{at: ms(30), back: true, from: ms(5), cost: 4, want: 3},  // nothing logged then
			{at: ms(40), back: true, from: ms(20), cost: 9, want: 7}, // only what was logged
			{at: ms(50), back: true, from: ms(0), cost: 3, want: 10},
		}},
		{"SlidingCounter", ratelimit.SlidingWindowCounter, "10/1s", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 7},
			{at: ms(20), back: true, from: -ms(2000), cost: 5, want: 7}, // left the ring
		}},
		{"TokenBucket", ratelimit.TokenBucket, "10/100s", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 7},
			{at: ms(20), back: true, from: ms(0), cost: 50, want: 10}, // up to the burst
		}},
		{"GCRA", ratelimit.GCRA, "10/100s", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 7},
			{at: ms(20), back: true, from: ms(0), cost: 50, want: 10}, // not before now
			{at: ms(30), cost: 10, want: 0},
		}},
		{"Quota", ratelimit.Quota, "10/day", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 7},
			{at: ms(20), back: true, from: -ms(3_600_000), cost: 5, want: 7}, // the day before
			{at: ms(30), back: true, from: ms(0), cost: 50, want: 10},
		}},
		{"ElasticIgnored", ratelimit.FixedWindowElastic, "10/1s", []settleStep{
			{at: ms(0), cost: 8, want: 2},
			{at: ms(10), back: true, from: ms(0), cost: 5, want: 2},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.runSettle(t, finish(t, limit(t, "budget", c.alg, c.rate)), c.steps)
		})
	}
}

// runSettle plays steps on a fresh key of l and checks Usage after each.
func (s *suite) runSettle(t *testing.T, l *ratelimit.Limit, steps []settleStep) {
	st := s.store(t)
	g, ok := st.(ratelimit.Settler)
	if !ok {
		t.Fatalf("%T is not a ratelimit.Settler", st)
	}
	key := s.key(t, "k")
	for i, p := range steps {
		now := t0.Add(p.at)
		h := ratelimit.Hit{Limit: l, Key: key, Cost: p.cost}
		if p.back {
			if err := g.GiveBack(context.Background(), now, []ratelimit.Hit{h}, []time.Time{t0.Add(p.from)}); err != nil {
				t.Fatalf("step %d: GiveBack: %v", i, err)
			}
		} else if ok, _ := decide1(t, st, now, h); !ok {
			t.Fatalf("step %d: count of %d at t0+%v denied", i, p.cost, p.at)
		}
		u, err := st.Usage(context.Background(), now, l, key)
		if err != nil || len(u) != 1 {
			t.Fatalf("step %d: Usage = %v, %v", i, u, err)
		}
		if u[0].Remaining != p.want {
			t.Errorf("step %d (t0+%v): Remaining = %d, want %d", i, p.at, u[0].Remaining, p.want)
		}
	}
}
