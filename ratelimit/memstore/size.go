package memstore

import (
	"unsafe"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// Memory accounting. Every linked key is charged its entry, its share of
// the index, its key string and, for a boxed state, the box slot and the
// cell with everything the cell points to (a log's ring, a sliding
// counter's buckets). The figures are what the store holds, not what the
// allocator rounds them to; BytesPerKey in the benchmarks measures the
// real heap per key for comparison.
const (
	// entryBytes is an entry plus its index slot (4 bytes, at most 3/4
	// full: 5.33 on average, rounded up).
	entryBytes = int64(unsafe.Sizeof(entry{})) + 6
	// boxBytes is a boxed state's slot in table.boxes (an interface).
	boxBytes = int64(unsafe.Sizeof(cell(nil)))
	// maxKeyLen is the length of the counter keys the gateway builds
	// ({TAG}HASH: two 22-character hashes and the braces) rounded up; a
	// longer key is charged its length.
	maxKeyLen = 48
)

// keyBytes is what entry e, holding a state of kind k (c when boxed), is
// charged.
func keyBytes(e *entry, k kind, c cell) uint32 {
	n := entryBytes + int64(len(e.hit))
	if k == kBox && c != nil {
		n += boxBytes + c.bytes()
	}
	return uint32(min(n, 1<<32-1))
}

// KeyBytes returns the most memory one key of l can be charged in the
// store: its entry, a gateway-built key and, for a boxed state, the cell
// holding l.StateBytes() of window states at their largest. validate
// prints it per limit; with Options.MaxBytes it tells how many keys of
// the worst case fit.
func KeyBytes(l *ratelimit.Limit) int64 {
	n := entryBytes + maxKeyLen
	if kindOf(l) == kBox {
		n += boxBytes + cellHeaderBytes(l) + l.StateBytes()
	}
	return n
}

// cellHeaderBytes is what a cell holds besides its window states: the
// expiry and the slice of states.
func cellHeaderBytes(*ratelimit.Limit) int64 { return 8 + 24 }

// stateBytes is the memory the window states ws point to beyond their own
// size: a log's ring, a sliding counter's buckets.
func stateBytes[S any](ws []S) int64 {
	var n int64
	for i := range ws {
		switch s := any(&ws[i]).(type) {
		case *window.LogState:
			n += int64(s.Bytes())
		case *window.SlidingCounterState:
			n += 8 * int64(cap(s.Counts))
		}
	}
	return n
}
