package memstore

import (
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// pageBits sets the entries per page (2^pageBits): entries are allocated a
// page at a time, so growing never copies them and a pointer to an entry
// stays valid while the shard's lock is held.
const pageBits = 8

const (
	pageSize = 1 << pageBits
	none     = int32(-1)
)

// entry is one (limit, key) state. A single-window state of the small
// algorithms lives inline in st; any other state is a cell in
// table.boxes and st[0] holds its index.
type entry struct {
	hit  string           // the hit's key (shared with the caller, not copied)
	lim  *ratelimit.Limit // the limit last used with it; nil when free
	st   [3]int64         // inline state, or st[0] = box index
	hash uint32           // low 32 bits of the key's hash
	prev int32            // towards the most recently used; none at the head
	next int32            // towards the least recently used; links the free list too
	size uint32           // bytes accounted for the key while linked (see keyBytes)
}

// table is one shard's keys: an open-addressing index (linear probing,
// backward-shift deletion, no tombstones) of int32 entry indices into
// paged entries, which an intrusive doubly linked list with int32 links
// keeps in least-recently-used order. It is not safe for concurrent use.
type table struct {
	slots []uint32 // 0 when empty, else entry index + 1; len is a power of two
	pages []*[pageSize]entry
	used  int32 // entries ever handed out (the rest of the last page is unused)
	free  int32 // head of the free list
	head  int32 // most recently used
	tail  int32 // least recently used
	// bhead and btail are the ends of a second list, of penalty boxes,
	// and qhead and qtail of a third, of quota states: they are evicted
	// only when no ordinary state can be (see evict), since a box
	// forgotten lets its client out early and a quota forgotten gives its
	// key a whole new period; boxes go before quotas.
	bhead, btail int32
	qhead, qtail int32
	n            int   // entries linked into the index and the lists
	nboxes       int   // penalty boxes among them
	bytes        int64 // the sizes of the linked entries
	boxes        []cell
	freeBoxes    []int32
	// cv is scratch space for a sliding counter's view of an inline
	// state (see apply), kept here so that it never escapes a stack.
	cv [1]window.SlidingCounterState
}

func newTable() table {
	return table{free: none, head: none, tail: none, bhead: none, btail: none, qhead: none, qtail: none}
}

func (t *table) at(i int32) *entry {
	return &t.pages[i>>pageBits][i&(pageSize-1)]
}

// find returns the index of the entry for (id, hit) with hash h, or none.
// Keys are compared in full, so a hash collision never merges two keys.
func (t *table) find(h uint32, id, hit string) int32 {
	if len(t.slots) == 0 {
		return none
	}
	mask := uint32(len(t.slots) - 1)
	for s := h & mask; ; s = (s + 1) & mask {
		v := t.slots[s]
		if v == 0 {
			return none
		}
		e := t.at(int32(v - 1))
		if e.hash == h && e.hit == hit && e.lim.ID == id {
			return int32(v - 1)
		}
	}
}

// alloc returns a free entry, not linked anywhere.
func (t *table) alloc() int32 {
	if i := t.free; i != none {
		t.free = t.at(i).next
		return i
	}
	if int(t.used) == len(t.pages)*pageSize {
		t.pages = append(t.pages, new([pageSize]entry))
	}
	t.used++
	return t.used - 1
}

// release returns an unlinked entry (and its box, if it has one) to the
// free lists.
func (t *table) release(i int32, boxed bool) {
	e := t.at(i)
	if boxed {
		t.boxes[e.st[0]] = nil
		t.freeBoxes = append(t.freeBoxes, int32(e.st[0]))
	}
	*e = entry{next: t.free}
	t.free = i
}

// box stores c and returns its index.
func (t *table) box(c cell) int64 {
	if n := len(t.freeBoxes); n > 0 {
		b := t.freeBoxes[n-1]
		t.freeBoxes = t.freeBoxes[:n-1]
		t.boxes[b] = c
		return int64(b)
	}
	t.boxes = append(t.boxes, c)
	return int64(len(t.boxes) - 1)
}

// link puts entry i (hash, hit and lim set) into the index and at the head
// of the list.
func (t *table) link(i int32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.insertSlot(t.at(i).hash, i)
	t.n++
	if t.at(i).lim.IsPenaltyBox() {
		t.nboxes++
	}
	t.bytes += int64(t.at(i).size)
	t.pushFront(i)
}

func (t *table) insertSlot(h uint32, i int32) {
	mask := uint32(len(t.slots) - 1)
	s := h & mask
	for t.slots[s] != 0 {
		s = (s + 1) & mask
	}
	t.slots[s] = uint32(i) + 1
}

// grow doubles the index (at least 8 slots).
func (t *table) grow() {
	old := t.slots
	t.slots = make([]uint32, max(2*len(old), 8))
	for _, v := range old {
		if v != 0 {
			t.insertSlot(t.at(int32(v-1)).hash, int32(v-1))
		}
	}
}

// unlink removes entry i from the index and the list; the caller releases
// it.
func (t *table) unlink(i int32) {
	mask := uint32(len(t.slots) - 1)
	s := t.at(i).hash & mask
	for t.slots[s] != uint32(i)+1 {
		s = (s + 1) & mask
	}
	// Backward shift: move later entries of the probe run into the hole
	// unless their home slot lies cyclically in (hole, their slot].
	for j := s; ; {
		j = (j + 1) & mask
		v := t.slots[j]
		if v == 0 {
			break
		}
		home := t.at(int32(v-1)).hash & mask
		if (s < j && s < home && home <= j) || (s > j && (s < home || home <= j)) {
			continue
		}
		t.slots[s] = v
		s = j
	}
	t.slots[s] = 0
	t.n--
	if t.at(i).lim.IsPenaltyBox() {
		t.nboxes--
	}
	t.bytes -= int64(t.at(i).size)
	t.detach(i)
}

// ends returns the head and tail of the list entry i belongs in: the
// quota list for a quota state, the box list for a penalty box, the main
// list for any other. (A limit's algorithm is part of its ID, and a box's
// ID is its limit's with a suffix no other ID has, so an entry never
// changes lists.)
func (t *table) ends(i int32) (head, tail *int32) {
	switch l := t.at(i).lim; {
	case l.Algorithm == ratelimit.Quota:
		return &t.qhead, &t.qtail
	case l.IsPenaltyBox():
		return &t.bhead, &t.btail
	}
	return &t.head, &t.tail
}

func (t *table) pushFront(i int32) {
	head, tail := t.ends(i)
	e := t.at(i)
	e.prev, e.next = none, *head
	if *head != none {
		t.at(*head).prev = i
	} else {
		*tail = i
	}
	*head = i
}

func (t *table) detach(i int32) {
	head, tail := t.ends(i)
	e := t.at(i)
	if e.prev != none {
		t.at(e.prev).next = e.next
	} else {
		*head = e.next
	}
	if e.next != none {
		t.at(e.next).prev = e.prev
	} else {
		*tail = e.prev
	}
}

// resize sets the bytes charged to the linked entry i.
func (t *table) resize(i int32, size uint32) {
	e := t.at(i)
	t.bytes += int64(size) - int64(e.size)
	e.size = size
}

// touch makes entry i the most recently used.
func (t *table) touch(i int32) {
	if head, _ := t.ends(i); *head != i {
		t.detach(i)
		t.pushFront(i)
	}
}

// remove unlinks and releases entry i.
func (t *table) remove(i int32) {
	boxed := kindOf(t.at(i).lim) == kBox
	t.unlink(i)
	t.release(i, boxed)
}

// reset empties the table and lets its memory go.
func (t *table) reset() { *t = newTable() }
