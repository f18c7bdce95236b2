package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// returnSteps is one step of a give-back table: count cost units at at, or
// (back) give cost units counted at from back, at at; then the window's
// Used must be want.
type returnSteps struct {
	at, from time.Duration
	back     bool
	cost     int64
	want     int64
}

// runReturns plays steps on a fresh key of l and checks Usage after each.
func (s *suite) runReturns(t *testing.T, l *ratelimit.Limit, steps []returnSteps) {
	st := s.store(t)
	r, ok := st.(ratelimit.Returner)
	if !ok {
		t.Fatalf("%T is not a ratelimit.Returner", st)
	}
	key := s.key(t, "k")
	for i, p := range steps {
		now := t0.Add(p.at)
		h := ratelimit.Hit{Limit: l, Key: key, Cost: p.cost}
		if p.back {
			if err := r.Return(context.Background(), now, []ratelimit.Hit{h}, []time.Time{t0.Add(p.from)}); err != nil {
				t.Fatalf("step %d: Return: %v", i, err)
			}
		} else if ok, _ := decide1(t, st, now, h); !ok {
			t.Fatalf("step %d: count of %d at t0+%v denied", i, p.cost, p.at)
		}
		u, err := st.Usage(context.Background(), now, l, key)
		if err != nil || len(u) != 1 {
			t.Fatalf("step %d: Usage = %v, %v", i, u, err)
		}
		if u[0].Used != p.want {
			t.Errorf("step %d (t0+%v): Used = %d, want %d", i, p.at, u[0].Used, p.want)
		}
	}
}

// returnFixedWindow is a hand-computed table: units come back only to the
// window of the instant they were counted at, never below zero, never
// into a later window (not even one sharing nothing but the key).
func (s *suite) returnFixedWindow(t *testing.T) {
	l := finish(t, limit(t, "lease", ratelimit.FixedWindow, "10/1s"))
	s.runReturns(t, l, []returnSteps{
		{at: ms(0), cost: 6, want: 6},
		{at: ms(10), back: true, from: ms(0), cost: 4, want: 2},
		{at: ms(20), cost: 8, want: 10},
		{at: ms(30), back: true, from: ms(999), cost: 3, want: 7},
		{at: ms(40), back: true, from: ms(20), cost: 20, want: 0}, // never below zero
		{at: ms(1000), cost: 3, want: 3},
		{at: ms(1010), back: true, from: ms(990), cost: 3, want: 3},  // window 0's units
		{at: ms(1020), back: true, from: ms(2000), cost: 3, want: 3}, // a window not begun
		{at: ms(1030), back: true, from: ms(1000), cost: 1, want: 2},
	})
}

// returnSlidingCounter is a hand-computed table (1 s in four 250 ms
// buckets): units come back to their own bucket while it is in the ring,
// never below zero, never to a newer bucket, never to a later bucket that
// reuses the slot of theirs.
func (s *suite) returnSlidingCounter(t *testing.T) {
	l := limit(t, "lease", ratelimit.SlidingWindowCounter, "10/1s")
	l.Precision = ms(250)
	l = finish(t, l)
	s.runReturns(t, l, []returnSteps{
		{at: ms(0), cost: 4, want: 4},   // bucket 0
		{at: ms(300), cost: 3, want: 7}, // bucket 1
		{at: ms(310), back: true, from: ms(10), cost: 2, want: 5},
		{at: ms(320), back: true, from: ms(260), cost: 5, want: 2}, // bucket 1: 0, not −2
		{at: ms(330), back: true, from: ms(600), cost: 1, want: 2}, // bucket 2: not begun
		{at: ms(1250), cost: 3, want: 3},                           // bucket 5, in bucket 0's slot
		{at: ms(1260), back: true, from: ms(0), cost: 2, want: 3},
		{at: ms(1270), back: true, from: ms(1250), cost: 1, want: 2},
	})
}
