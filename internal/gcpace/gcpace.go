// Package gcpace gives the garbage collector a minimum heap: below it, the
// collector does not run just because the heap doubled.
//
// Go starts a collection when the heap has grown by GOGC percent (100)
// over what the last one left live, and never below a 4 MB heap. A gateway
// keeps little alive between requests (a megabyte or two of library data
// and connection buffers) but allocates several kilobytes per proxied
// request, so at the default pacing it collects every few hundred
// requests, and each collection marks the same long-lived data again.
// With a minimum heap of M bytes the heap may grow to M before a
// collection starts; above M/2 of live data the pacing is Go's own. The
// heap is then at most max(M, Go's goal), a bound fixed by the
// configuration, as the store's counters are.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Pacer keeps the collector's goal at or above a minimum heap, adjusting
// GOGC after each collection from the live heap it left. The zero value
// is not usable; call Start. Safe for concurrent use.
type Pacer struct {
	min     atomic.Int64
	stopped atomic.Bool

	mu      sync.Mutex
	percent int // the GOGC last set; 0 before the first
	samples []metrics.Sample
}

// defaultPercent is Go's own GOGC, the least Pacer sets.
const defaultPercent = 100

// Start returns a Pacer holding the heap's goal at min bytes or more, from
// now on; min <= 0 leaves Go's pacing alone until Set is called with
// more.
func Start(min int64) *Pacer {
	p := &Pacer{samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	p.min.Store(min)
	p.adjust()
	p.arm()
	return p
}

// Set changes the minimum heap (a configuration reload); it applies at
// once.
func (p *Pacer) Set(min int64) {
	p.min.Store(min)
	p.adjust()
}

// Stop gives the pacing back to Go's default.
func (p *Pacer) Stop() {
	p.stopped.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.percent != 0 {
		debug.SetGCPercent(defaultPercent)
		p.percent = 0
	}
}

// sentinel is an object that dies at every collection: its cleanup tells
// the pacer a cycle ended. It holds a pointer so that it is not packed
// with other tiny objects, which would keep it alive longer.
type sentinel struct{ _ *int }

// arm registers a cleanup for a new sentinel, which runs after the next
// collection and arms the next one.
func (p *Pacer) arm() {
	runtime.AddCleanup(new(sentinel), func(p *Pacer) {
		if p.stopped.Load() {
			return
		}
		p.adjust()
		p.arm()
	}, p)
}

// adjust sets GOGC for the live heap the last collection left.
func (p *Pacer) adjust() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return
	}
	metrics.Read(p.samples)
	live, stacks, globals := p.samples[0].Value.Uint64(), p.samples[1].Value.Uint64(), p.samples[2].Value.Uint64()
	want := Percent(p.min.Load(), int64(live), int64(stacks+globals))
	if p.percent == 0 && want == defaultPercent {
		return // never set, and Go's own pacing is what is wanted
	}
	// Small changes of the live heap move the goal by as little: not
	// worth a call into the runtime's pacer.
	if p.percent != 0 && want > p.percent*95/100 && want < p.percent*105/100 {
		return
	}
	debug.SetGCPercent(want)
	p.percent = want
}

// maxPercent bounds the GOGC Percent returns.
const maxPercent = 1 << 20

// goMinimum is the runtime's minimum heap at GOGC=100; it scales with GOGC.
const goMinimum = 4 << 20

// Percent is the GOGC whose goal reaches minHeap bytes after a collection that
// left live bytes of heap and roots bytes of stacks and globals, and never
// less than Go's default of 100. Go's goal is the larger of
// live + (live + roots) * GOGC/100 and a minimum heap of 4 MiB * GOGC/100.
func Percent(minHeap, live, roots int64) int {
	if minHeap <= 0 {
		return defaultPercent
	}
	pct := 100 * (minHeap / goMinimum)
	if rest := minHeap % goMinimum; rest != 0 {
		pct += int64(float64(rest) * 100 / goMinimum)
	}
	if scanned := live + roots; scanned > 0 {
		// The goal grows with the live heap: the minimum heap is reached
		// at a lower percentage.
		pct = min(pct, 100*(minHeap-live)/scanned)
	}
	switch {
	case pct < defaultPercent:
		return defaultPercent
	case pct > maxPercent:
		return maxPercent
	}
	return int(pct)
}
