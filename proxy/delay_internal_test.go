package proxy

import (
	"strconv"
	"testing"
)

// TestRoomShares: a waiting room of 24 with a share of 3 per key. Each
// row is a step with the outcome written out: keys fill their shares and
// are refused past them while other keys still get in, the room as a
// whole is bounded, and leaving gives the place back.
func TestRoomShares(t *testing.T) {
	const maxWaiting, share = 24, 3
	var r room
	type step struct {
		op   string // enter, leave or full
		key  string
		want bool // enter: admitted; full: full
	}
	var held []struct {
		key   string
		keyed bool
	}
	steps := []step{
		{"full", "a", false},
		{"enter", "a", true}, {"enter", "a", true}, {"enter", "a", true},
		{"full", "a", true}, // a holds its share
		{"enter", "a", false},
		{"full", "b", false}, // another key is not
		{"enter", "b", true}, {"enter", "b", true}, {"enter", "b", true},
		{"enter", "b", false},
		{"enter", "c", true}, {"enter", "c", true}, {"enter", "c", true},
		{"enter", "c", false},
		// Three keys, each at its share: a fourth still gets in.
		{"full", "d", false},
		{"enter", "d", true},
		{"leave", "a", false}, // one of a's
		{"full", "a", false},
		{"enter", "a", true},
		{"enter", "a", false},
	}
	for i, s := range steps {
		switch s.op {
		case "enter":
			ok, keyed := r.enter(s.key, maxWaiting, share)
			if ok != s.want {
				t.Fatalf("step %d: enter(%q) = %v, want %v", i, s.key, ok, s.want)
			}
			if ok {
				if !keyed {
					t.Fatalf("step %d: a place of a room with shares was not counted by key", i)
				}
				held = append(held, struct {
					key   string
					keyed bool
				}{s.key, keyed})
			}
		case "full":
			if got := r.full(s.key, maxWaiting, share); got != s.want {
				t.Fatalf("step %d: full(%q) = %v, want %v", i, s.key, got, s.want)
			}
		case "leave":
			for j, h := range held {
				if h.key == s.key {
					r.leave(h.key, h.keyed)
					held = append(held[:j], held[j+1:]...)
					break
				}
			}
		}
	}
	if n := r.total.Load(); n != 10 {
		t.Fatalf("total = %d, want 10", n)
	}
	if n := r.keys(); n != 4 {
		t.Fatalf("keys = %d, want 4", n)
	}
	// The room as a whole: 14 more distinct keys fill it to 24.
	for i := range 14 {
		if ok, _ := r.enter("k"+strconv.Itoa(i), maxWaiting, share); !ok {
			t.Fatalf("distinct key %d refused with %d waiting", i, r.total.Load())
		}
	}
	if ok, _ := r.enter("fresh", maxWaiting, share); ok || !r.full("fresh", maxWaiting, share) {
		t.Fatal("a full room took a fresh key")
	}
	for _, h := range held {
		r.leave(h.key, h.keyed)
	}
	for i := range 14 {
		r.leave("k"+strconv.Itoa(i), true)
	}
	if n, k := r.total.Load(), r.keys(); n != 0 || k != 0 {
		t.Fatalf("after every waiter left: total %d, keys %d, want 0 and 0", n, k)
	}
}

// TestRoomBoundedByKeys: a flood of distinct keys never holds more map
// entries than the room's places, and an emptied room that grew past
// shrinkAbove drops its map.
func TestRoomBoundedByKeys(t *testing.T) {
	const maxWaiting, share = 200, 25
	var r room
	admitted := 0
	for i := range 10000 {
		if ok, _ := r.enter("key-"+strconv.Itoa(i), maxWaiting, share); ok {
			admitted++
		}
		if k := r.keys(); k > maxWaiting {
			t.Fatalf("after %d keys: %d map entries, more than max_waiting %d", i+1, k, maxWaiting)
		}
	}
	if admitted != maxWaiting {
		t.Fatalf("admitted %d distinct keys, want %d", admitted, maxWaiting)
	}
	for i := range maxWaiting {
		r.leave("key-"+strconv.Itoa(i), true)
	}
	if r.byKey != nil || r.total.Load() != 0 {
		t.Fatalf("an emptied room kept its grown map (%d entries) or waiters (%d)", len(r.byKey), r.total.Load())
	}
}

// TestRoomOneKeyForAll: a limit whose key is the same for every client
// (its share is the whole room) counts no keys.
func TestRoomOneKeyForAll(t *testing.T) {
	var r room
	for i := range 4 {
		ok, keyed := r.enter("-", 4, 4)
		if !ok || keyed {
			t.Fatalf("waiter %d: enter = %v, %v; want admitted, not by key", i, ok, keyed)
		}
	}
	if ok, _ := r.enter("-", 4, 4); ok {
		t.Fatal("a fifth waiter entered a room of 4")
	}
	if r.byKey != nil {
		t.Fatal("a room without shares made a key map")
	}
}

// BenchmarkRoom: the look every request of a delay limit takes (full) in
// an empty room and in a busy one, and a waiter's enter and leave.
func BenchmarkRoom(b *testing.B) {
	b.Run("full-empty", func(b *testing.B) {
		var r room
		b.ReportAllocs()
		for b.Loop() {
			r.full("key", 1024, 128)
		}
	})
	b.Run("full-busy", func(b *testing.B) {
		var r room
		for i := range 500 {
			r.enter("k"+strconv.Itoa(i), 1024, 128)
		}
		b.ReportAllocs()
		for b.Loop() {
			r.full("key", 1024, 128)
		}
	})
	b.Run("enter-leave", func(b *testing.B) {
		var r room
		b.ReportAllocs()
		for b.Loop() {
			_, keyed := r.enter("key", 1024, 128)
			r.leave("key", keyed)
		}
	})
}

// keys returns the number of keys with waiters.
func (r *room) keys() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}
