package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

func finished(t *testing.T, l *ratelimit.Limit) *ratelimit.Limit {
	t.Helper()
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTableAgainstModel drives one table through random inserts, lookups,
// touches and removals with hashes drawn from 16 values (so most keys
// collide) and checks every lookup, the size and the LRU order against a
// plain model.
func TestTableAgainstModel(t *testing.T) {
	l := finished(t, &ratelimit.Limit{Name: "m", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}})
	r := rand.New(rand.NewPCG(5, 6))
	tb := newTable()
	type modelEntry struct {
		idx  int32
		hash uint32
	}
	model := map[string]modelEntry{}
	var order []string // most recently used first
	moveFront := func(k string) {
		for i, x := range order {
			if x == k {
				order = append(order[:i], order[i+1:]...)
				break
			}
		}
		order = append([]string{k}, order...)
	}
	for step := range 20000 {
		k := fmt.Sprintf("k%d", r.IntN(300))
		h := uint32(r.IntN(16)) * 0x9e3779b1
		if m, ok := model[k]; ok {
			h = m.hash
		}
		switch r.IntN(3) {
		case 0, 1: // look up, insert when absent
			got := tb.find(h, l.ID, k)
			m, ok := model[k]
			if ok != (got != none) || (ok && got != m.idx) {
				t.Fatalf("step %d: find(%q) = %d, model %v %d", step, k, got, ok, m.idx)
			}
			if ok {
				tb.touch(got)
			} else {
				i := tb.alloc()
				e := tb.at(i)
				e.hit, e.lim, e.hash = k, l, h
				tb.link(i)
				model[k] = modelEntry{i, h}
			}
			moveFront(k)
		case 2: // remove
			if m, ok := model[k]; ok {
				tb.remove(m.idx)
				delete(model, k)
				for i, x := range order {
					if x == k {
						order = append(order[:i], order[i+1:]...)
						break
					}
				}
			}
		}
		if tb.n != len(model) {
			t.Fatalf("step %d: n = %d, model %d", step, tb.n, len(model))
		}
	}
	i := tb.head
	for _, k := range order {
		if i == none || tb.at(i).hit != k {
			t.Fatalf("LRU order differs at %q", k)
		}
		i = tb.at(i).next
	}
	if i != none {
		t.Fatal("LRU list longer than the model")
	}
}

// TestCollidingKeysStayApart gives two keys the same 32-bit hash and
// checks that they keep separate counters.
func TestCollidingKeysStayApart(t *testing.T) {
	l := finished(t, &ratelimit.Limit{Name: "c", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 10, Window: time.Hour}}})
	sh := &shard{t: newTable(), max: 10}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, k := range []string{"a", "b", "b"} {
		st, old, isNew := sh.lookup(l, k, 42, now)
		sh.t.apply(&st, opTake, l, &args{now: now, cost: 1})
		if isNew {
			if old != none {
				t.Fatal("unexpected expired entry")
			}
			sh.commitNew(st, l, k, 42, now)
		}
	}
	for k, want := range map[string]int64{"a": 9, "b": 8} {
		st, _, isNew := sh.lookup(l, k, 42, now)
		if isNew {
			t.Fatalf("%s: not found", k)
		}
		var d ratelimit.Decision
		sh.t.apply(&st, opReport, l, &args{now: now, d: &d})
		if d.Remaining != want {
			t.Errorf("%s: Remaining %d, want %d", k, d.Remaining, want)
		}
	}
}

// TestLRUBound checks the hard bound, that the least recently used key is
// the one evicted, and that Evictions counts it.
func TestLRUBound(t *testing.T) {
	ctx := context.Background()
	l := finished(t, &ratelimit.Limit{Name: "lru", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 10, Window: time.Hour}}})
	s := New(Options{MaxKeys: 3, Shards: 1})
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	hit := func(k string) {
		if _, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: k, Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
	}
	hit("a")
	hit("b")
	hit("c")
	hit("a") // b is now the least recently used
	hit("d")
	if s.Len() != 3 || s.Evictions() != 1 {
		t.Fatalf("Len %d, Evictions %d; want 3, 1", s.Len(), s.Evictions())
	}
	for k, used := range map[string]int64{"a": 2, "b": 0, "c": 1, "d": 1} {
		u, err := s.Usage(ctx, now, l, k)
		if err != nil {
			t.Fatal(err)
		}
		if u[0].Used != used {
			t.Errorf("%s: used %d, want %d", k, u[0].Used, used)
		}
	}
}

// TestExpiredReclaimedNotEvicted fills a shard with keys that then expire:
// new keys reclaim them from the cold end without counting evictions, and
// a denied request stores nothing.
func TestExpiredReclaimedNotEvicted(t *testing.T) {
	ctx := context.Background()
	l := finished(t, &ratelimit.Limit{Name: "exp", Algorithm: ratelimit.TokenBucket,
		Rates: []ratelimit.Rate{{Limit: 2, Window: time.Second}}})
	s := New(Options{MaxKeys: 4, Shards: 1})
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	for i := range 4 {
		if _, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: fmt.Sprint("old", i), Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
	}
	later := now.Add(time.Minute)
	for i := range 4 {
		if _, err := s.Decide(ctx, later, []ratelimit.Hit{{Limit: l, Key: fmt.Sprint("new", i), Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 4 || s.Evictions() != 0 {
		t.Fatalf("Len %d, Evictions %d; want 4, 0", s.Len(), s.Evictions())
	}
	if ok, _ := s.Decide(ctx, later, []ratelimit.Hit{{Limit: l, Key: "big", Cost: 3}}, out); ok || !out[0].Never {
		t.Fatalf("cost 3 > burst 2: allowed=%v %+v", ok, out[0])
	}
	if s.Len() != 4 || s.Evictions() != 0 {
		t.Fatalf("after a denial: Len %d, Evictions %d; want 4, 0", s.Len(), s.Evictions())
	}
}

// TestEveryKindRoundTrip counts two keys of every state kind (inline and
// boxed) in one request and reads them back, also after Release and
// Reset.
func TestEveryKindRoundTrip(t *testing.T) {
	ctx := context.Background()
	day := []ratelimit.Rate{{Limit: 100, Window: 24 * time.Hour}}
	two := []ratelimit.Rate{{Limit: 100, Window: time.Hour}, {Limit: 1000, Window: 24 * time.Hour}}
	limits := []*ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Rates: day},
		{Algorithm: ratelimit.FixedWindowElastic, Rates: day},
		{Algorithm: ratelimit.SlidingWindowLog, Rates: day},
		{Algorithm: ratelimit.SlidingWindowCounter, Rates: day},
		{Algorithm: ratelimit.SlidingWindowCounter, Rates: day, Precision: time.Hour},
		{Algorithm: ratelimit.TokenBucket, Rates: day},
		{Algorithm: ratelimit.GCRA, Rates: day},
		{Algorithm: ratelimit.Concurrency, MaxInFlight: 100},
		{Algorithm: ratelimit.FixedWindow, Rates: two},
	}
	s := New(Options{MaxKeys: 1000, Shards: 2})
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var hits []ratelimit.Hit
	for i, l := range limits {
		l.Name = fmt.Sprint("k", i)
		finished(t, l)
		hits = append(hits, ratelimit.Hit{Limit: l, Key: "x", Cost: 3}, ratelimit.Hit{Limit: l, Key: "y", Cost: 1}, ratelimit.Hit{Limit: l, Key: "x", Cost: 2})
	}
	out := make([]ratelimit.Decision, len(hits))
	if ok, err := s.Decide(ctx, now, hits, out); !ok || err != nil {
		t.Fatalf("Decide: %v %v", ok, err)
	}
	if s.Len() != 2*len(limits) {
		t.Fatalf("Len %d, want %d", s.Len(), 2*len(limits))
	}
	for _, l := range limits {
		for k, used := range map[string]int64{"x": 5, "y": 1} {
			u, err := s.Usage(ctx, now, l, k)
			if err != nil {
				t.Fatal(err)
			}
			if u[0].Used != used {
				t.Errorf("%s %s: used %d, want %d", l.Algorithm, k, u[0].Used, used)
			}
		}
	}
	if err := s.Release(ctx, hits, out); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2*len(limits)-2 {
		t.Fatalf("after Release: Len %d, want %d", s.Len(), 2*len(limits)-2)
	}
	for _, l := range limits {
		if err := s.Reset(ctx, l, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != len(limits)-1 {
		t.Fatalf("after Reset: Len %d, want %d", s.Len(), len(limits)-1)
	}
	if err := s.Close(); err != nil || s.Len() != 0 {
		t.Fatalf("after Close: %v, Len %d", err, s.Len())
	}
}
