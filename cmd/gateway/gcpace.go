package main

import (
	"os"

	"github.com/tollgate/gateway/internal/gcpace"
)

// startPacer gives the garbage collector server.gc_min_heap as its minimum
// heap, unless the operator set GOGC, which then decides alone (an empty
// GOGC is Go's default, as the runtime reads it).
func (g *gateway) startPacer(minHeap int64) {
	if v := os.Getenv("GOGC"); v != "" {
		if minHeap > 0 {
			g.log.Info("GOGC is set: server.gc_min_heap is not applied", "GOGC", v)
		}
		return
	}
	g.pacer = gcpace.Start(minHeap)
}
