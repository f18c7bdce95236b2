// Package topk finds the heaviest clients of each limit: the identities
// most often denied and those most often near their limit, over the last
// minute and the last 15 minutes, in memory bounded by k entries per
// sketch (the Space-Saving algorithm). It knows nothing of HTTP; the
// telemetry observer feeds it one call per decision.
package topk

// Sketch is a Space-Saving summary of at most k items (Metwally, Agrawal
// and El Abbadi, 2005). Every item whose true count exceeds N/k (N = the
// sum of all counts added) is in it; an item's count is an overestimate of
// its true count by at most its Err, which is at most N/k. A Sketch is not
// safe for concurrent use; Add never allocates.
type Sketch struct {
	slots []slot      // stable storage; slot i is at heap position slots[i].pos
	heap  []heapEntry // a min-heap by count; counts live here, next to each other
	table []cell      // open addressing fingerprint -> slot id, linear probing
	mask  uint64
	total uint64
}

type slot struct {
	fp          uint64
	err         uint64
	kind, value string
	pos         int32
}

type heapEntry struct {
	count uint64
	id    int32
}

// cell is one entry of the fingerprint table; id < 0 marks it empty.
type cell struct {
	fp uint64
	id int32
}

// NewSketch returns an empty sketch of k ≥ 1 items.
func NewSketch(k int) *Sketch {
	if k < 1 {
		k = 1
	}
	size := 4
	for size < 2*k {
		size *= 2
	}
	s := &Sketch{
		slots: make([]slot, 0, k),
		heap:  make([]heapEntry, 0, k),
		table: make([]cell, size),
		mask:  uint64(size - 1),
	}
	s.Reset()
	return s
}

// Reset empties s, keeping its memory.
func (s *Sketch) Reset() {
	for i := range s.table {
		s.table[i].id = -1
	}
	clear(s.slots[:cap(s.slots)])
	s.slots, s.heap, s.total = s.slots[:0], s.heap[:0], 0
}

// Total is the sum of all counts added since the last Reset.
func (s *Sketch) Total() uint64 { return s.total }

// Len is the number of items s holds.
func (s *Sketch) Len() int { return len(s.slots) }

// K is the number of items s can hold.
func (s *Sketch) K() int { return cap(s.slots) }

// Full reports whether s holds k items: an item not in it may then have
// had up to Min occurrences.
func (s *Sketch) Full() bool { return len(s.slots) == cap(s.slots) }

// Min is the smallest count in s (0 when s is empty).
func (s *Sketch) Min() uint64 {
	if len(s.heap) == 0 {
		return 0
	}
	return s.heap[0].count
}

// Add counts n occurrences of the item with fingerprint fp; kind and value
// name it (kept by reference, never copied).
func (s *Sketch) Add(fp uint64, kind, value string, n uint64) {
	s.total += n
	if id := s.find(fp); id >= 0 {
		pos := s.slots[id].pos
		s.heap[pos].count += n
		s.down(int(pos))
		return
	}
	if len(s.slots) < cap(s.slots) {
		id := int32(len(s.slots))
		s.slots = append(s.slots, slot{fp: fp, kind: kind, value: value, pos: int32(len(s.heap))})
		s.heap = append(s.heap, heapEntry{count: n, id: id})
		s.insert(fp, id)
		s.up(len(s.heap) - 1)
		return
	}
	// Replace the item of the smallest count: the newcomer inherits it as
	// its possible overestimate.
	id := s.heap[0].id
	sl := &s.slots[id]
	s.remove(sl.fp)
	minCount := s.heap[0].count
	sl.fp, sl.err, sl.kind, sl.value = fp, minCount, kind, value
	s.heap[0].count = minCount + n
	s.insert(fp, id)
	s.down(0)
}

// Each calls f for every item in s, in no particular order.
func (s *Sketch) Each(f func(fp uint64, kind, value string, count, err uint64)) {
	for i := range s.slots {
		sl := &s.slots[i]
		f(sl.fp, sl.kind, sl.value, s.heap[sl.pos].count, sl.err)
	}
}

func (s *Sketch) find(fp uint64) int32 {
	for i := fp & s.mask; ; i = (i + 1) & s.mask {
		c := s.table[i]
		if c.id < 0 {
			return -1
		}
		if c.fp == fp {
			return c.id
		}
	}
}

func (s *Sketch) insert(fp uint64, id int32) {
	i := fp & s.mask
	for s.table[i].id >= 0 {
		i = (i + 1) & s.mask
	}
	s.table[i] = cell{fp: fp, id: id}
}

// remove deletes fp by backward-shift, so that probing needs no tombstones.
func (s *Sketch) remove(fp uint64) {
	i := fp & s.mask
	for s.table[i].fp != fp || s.table[i].id < 0 {
		i = (i + 1) & s.mask
	}
	for {
		s.table[i].id = -1
		j := i
		for {
			j = (j + 1) & s.mask
			c := s.table[j]
			if c.id < 0 {
				return
			}
			home := c.fp & s.mask
			// c may move to i unless its home lies cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				s.table[i] = c
				i = j
				break
			}
		}
	}
}

func (s *Sketch) up(i int) {
	h := s.heap
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].count <= e.count {
			break
		}
		h[i] = h[p]
		s.slots[h[i].id].pos = int32(i)
		i = p
	}
	h[i] = e
	s.slots[e.id].pos = int32(i)
}

// down moves the entry at i below every entry of a smaller or equal count
// no further than needed: it stops at the first child not smaller.
func (s *Sketch) down(i int) {
	h := s.heap
	n := len(h)
	e := h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].count < h[l].count {
			m = r
		}
		if h[m].count >= e.count {
			break
		}
		h[i] = h[m]
		s.slots[h[i].id].pos = int32(i)
		i = m
	}
	h[i] = e
	s.slots[e.id].pos = int32(i)
}
