package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

func finishedLimit(t *testing.T, l ratelimit.Limit) *ratelimit.Limit {
	t.Helper()
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return &l
}

// TestQuotaEvictedLast: with the store full, new keys of other limits
// evict each other, never a quota's state; only when quotas alone fill
// the store is the least recently used quota evicted.
func TestQuotaEvictedLast(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{MaxKeys: 32, Shards: 1})
	q := finishedLimit(t, ratelimit.Limit{Name: "q", Algorithm: ratelimit.Quota,
		Rates: []ratelimit.Rate{{Limit: 100, Window: ratelimit.MonthWindow}}})
	f := finishedLimit(t, ratelimit.Limit{Name: "f", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 100, Window: time.Minute}}})
	now := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	decide := func(l *ratelimit.Limit, key string, cost int64) {
		t.Helper()
		out := make([]ratelimit.Decision, 1)
		if ok, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: key, Cost: cost}}, out); err != nil || !ok {
			t.Fatalf("Decide(%s, %s) = %v, %v", l.Name, key, ok, err)
		}
	}
	used := func(l *ratelimit.Limit, key string) int64 {
		u, err := s.Usage(ctx, now, l, key)
		if err != nil {
			t.Fatal(err)
		}
		return u[0].Used
	}
	for i := range 10 {
		decide(q, fmt.Sprint("customer-", i), 7)
	}
	// A flood of other keys, far more than the store holds.
	for i := range 1000 {
		decide(f, fmt.Sprint("flood-", i), 1)
	}
	for i := range 10 {
		if got := used(q, fmt.Sprint("customer-", i)); got != 7 {
			t.Errorf("quota of customer-%d after the flood: used %d, want 7", i, got)
		}
	}
	if s.Len() > 32 {
		t.Errorf("store holds %d keys, bound 32", s.Len())
	}
	// Quotas alone past the bound: the least recently used goes.
	for i := 10; i < 40; i++ {
		decide(q, fmt.Sprint("customer-", i), 1)
	}
	if got := used(q, "customer-0"); got != 0 {
		t.Errorf("the least recently used quota was kept (used %d) with quotas alone over the bound", got)
	}
	if got := used(q, "customer-39"); got != 1 {
		t.Errorf("the newest quota: used %d, want 1", got)
	}
}

// TestPenaltyHostile: what a client could send against a limit with a
// penalty. Random keys with a cost above the capacity are refused without
// a penalty box each (memory stays flat); hammering in the box neither
// extends it nor counts; a clock stepped back does not shorten it.
func TestPenaltyHostile(t *testing.T) {
	ctx := context.Background()
	l := finishedLimit(t, ratelimit.Limit{Name: "login", Algorithm: ratelimit.FixedWindow, Penalty: time.Hour,
		Rates: []ratelimit.Rate{{Limit: 2, Window: time.Minute}}})
	t0 := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *memstore.Store)
	}{
		{"random keys, huge cost", func(t *testing.T, s *memstore.Store) {
			out := make([]ratelimit.Decision, 1)
			for i := range 1000 {
				h := ratelimit.Hit{Limit: l, Key: fmt.Sprint("random-", i), Cost: 1 << 40}
				if ok, _ := s.Decide(ctx, t0, []ratelimit.Hit{h}, out); ok || !out[0].Never || out[0].Penalty {
					t.Fatalf("cost 2^40: %v %+v; want a Never denial, no penalty", ok, out[0])
				}
			}
			if n := s.Len(); n != 0 {
				t.Errorf("%d keys held after 1000 refused requests, want 0", n)
			}
		}},
		{"hammering in the box", func(t *testing.T, s *memstore.Store) {
			out := make([]ratelimit.Decision, 1)
			h := []ratelimit.Hit{{Limit: l, Key: "abuser", Cost: 1}}
			for i := range 3 {
				s.Decide(ctx, t0.Add(time.Duration(i)*time.Second), h, out)
			}
			if !out[0].Penalty || out[0].RetryAfter != time.Hour {
				t.Fatalf("third request: %+v, want the penalty starting", out[0])
			}
			for i := range 1000 {
				s.Decide(ctx, t0.Add(2*time.Second+time.Duration(i)*time.Second), h, out)
			}
			at := t0.Add(time.Hour + 2*time.Second)
			if ok, _ := s.Decide(ctx, at, h, out); !ok || out[0].Remaining != 1 {
				t.Errorf("at the penalty's end: %v %+v; want allowed with a fresh window (remaining 1)", ok, out[0])
			}
		}},
		{"clock stepped back", func(t *testing.T, s *memstore.Store) {
			out := make([]ratelimit.Decision, 1)
			h := []ratelimit.Hit{{Limit: l, Key: "abuser", Cost: 1}}
			for i := range 3 {
				s.Decide(ctx, t0.Add(time.Duration(i)*time.Second), h, out)
			}
			if ok, _ := s.Decide(ctx, t0.Add(-30*time.Second), h, out); ok || out[0].RetryAfter != time.Hour+32*time.Second {
				t.Errorf("30 s before the penalty began: %v %+v; want denied for the whole box", ok, out[0])
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, memstore.New(memstore.Options{})) })
	}
}

// TestPenaltyTakeCounts: a take (counting a request already forwarded,
// whose response came back) counts even when its key entered the penalty
// box meanwhile; a peek the limit denies starts the penalty.
func TestPenaltyTakeCounts(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	l := finishedLimit(t, ratelimit.Limit{Name: "login", Algorithm: ratelimit.FixedWindow, Penalty: time.Hour,
		Rates: []ratelimit.Rate{{Limit: 1, Window: time.Minute}}})
	t0 := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	take := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1, Mode: ratelimit.HitTake}}
	peek := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1, Mode: ratelimit.HitPeek}}
	s.Decide(ctx, t0, take, out)
	if ok, _ := s.Decide(ctx, t0.Add(time.Second), peek, out); ok || !out[0].Penalty {
		t.Fatalf("peek of an exhausted limit: %v %+v; want denied, penalty started", ok, out[0])
	}
	if ok, _ := s.Decide(ctx, t0.Add(2*time.Second), take, out); !ok || !out[0].Counted || out[0].Penalty {
		t.Errorf("take in the box: %v %+v; want counted (the request was forwarded)", ok, out[0])
	}
}

// TestPenaltyBoxSurvivesFlood: with the store full, a flood of fresh keys
// (on the boxed limit itself and on another) evicts ordinary counters,
// never a penalty box nor a quota: the boxed client stays boxed. A flood
// of boxed keys is held to a quarter of the store (a new box past it
// evicts the least recently used box), so it evicts neither the quotas
// nor more than that share of the room the other states have.
func TestPenaltyBoxSurvivesFlood(t *testing.T) {
	ctx := context.Background()
	const maxKeys = 32
	s := memstore.New(memstore.Options{MaxKeys: maxKeys, Shards: 1})
	login := finishedLimit(t, ratelimit.Limit{Name: "login", Algorithm: ratelimit.FixedWindow, Penalty: time.Hour,
		Rates: []ratelimit.Rate{{Limit: 2, Window: time.Minute}}})
	other := finishedLimit(t, ratelimit.Limit{Name: "other", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 100, Window: time.Minute}}})
	q := finishedLimit(t, ratelimit.Limit{Name: "q", Algorithm: ratelimit.Quota,
		Rates: []ratelimit.Rate{{Limit: 100, Window: ratelimit.MonthWindow}}})
	t0 := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	decide := func(l *ratelimit.Limit, key string, at time.Time, cost int64) ratelimit.Decision {
		t.Helper()
		if _, err := s.Decide(ctx, at, []ratelimit.Hit{{Limit: l, Key: key, Cost: cost}}, out); err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	boxed := func(key string, at time.Time) bool {
		u, err := s.Usage(ctx, at, login.PenaltyBox(), key)
		if err != nil {
			t.Fatal(err)
		}
		return u[0].Used == 1
	}
	for range 3 {
		decide(login, "abuser", t0, 1)
	}
	if !out[0].Penalty {
		t.Fatalf("third request: %+v, want the penalty starting", out[0])
	}
	decide(q, "customer", t0, 7)

	// Fresh keys, far more than the store holds, on the boxed limit and
	// on another: each counts one request.
	at := t0.Add(time.Second)
	for i := range 1000 {
		decide(login, fmt.Sprint("flood-", i), at, 1)
		decide(other, fmt.Sprint("flood-", i), at, 1)
	}
	if n := s.Len(); n > maxKeys {
		t.Errorf("store holds %d keys, bound %d", n, maxKeys)
	}
	if d := decide(login, "abuser", at, 1); d.Allowed || !d.Penalty || d.RetryAfter != time.Hour-time.Second {
		t.Fatalf("the boxed client after a flood of fresh keys: %+v, want still in the box (RetryAfter 59m59s)", d)
	}
	u, err := s.Usage(ctx, at, q, "customer")
	if err != nil || u[0].Used != 7 {
		t.Fatalf("quota after the flood: %+v, %v; want used 7", u, err)
	}

	// A flood of boxed keys: each gets boxed (three requests).
	at = t0.Add(2 * time.Second)
	for i := range 200 {
		for range 3 {
			decide(login, fmt.Sprint("boxed-", i), at, 1)
		}
		if !out[0].Penalty {
			t.Fatalf("boxed-%d: %+v, want boxed", i, out[0])
		}
	}
	held := 0
	for i := range 200 {
		if boxed(fmt.Sprint("boxed-", i), at) {
			held++
		}
	}
	if held == 0 || held > maxKeys/4 {
		t.Errorf("%d boxes of the flood held, want 1..%d (a quarter of the store)", held, maxKeys/4)
	}
	if !boxed("boxed-199", at) {
		t.Errorf("the newest box was evicted")
	}
	if n := s.Len(); n > maxKeys {
		t.Errorf("store holds %d keys, bound %d", n, maxKeys)
	}
	if u, err := s.Usage(ctx, at, q, "customer"); err != nil || u[0].Used != 7 {
		t.Fatalf("quota after a flood of boxed keys: %+v, %v; want used 7", u, err)
	}
}
