package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMemoryMaxBytes (issue: max_keys bounds the number of counters, not
// their memory; 1000/1h with precision 1s is ~29 KB a key and 5,000 random
// keys took 170 MB): with store.memory.max_bytes = 16 MiB, 5,000 random
// API keys on that limit keep the store's bytes under the bound (its
// /metrics gauge) and the gateway's resident memory within a small
// multiple of it, evicting the least recently used keys; validate prints
// the worst case per key.
func TestMemoryMaxBytes(t *testing.T) {
	t.Parallel()
	const maxBytes = 16 << 20
	g := startGateway(t, "maxbytes.toml.tmpl", gwOpts{Data: map[string]any{"MaxBytes": maxBytes}})
	code, stdout, stderr := runGateway(t, nil, "validate", "--config", g.Config)
	if code != 0 || !strings.Contains(stdout, `limit "fine" sliding_window_counter: up to `) || !strings.Contains(stdout, "16777216 bytes") {
		t.Fatalf("validate: exit %d\n%s%s\nwant the worst case per key of limit \"fine\" and the bound", code, stdout, stderr)
	}
	c := newClient(t, "")
	rss0, heap0 := rssKB(t, g), liveHeap(t, g)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 5000 {
		key := fmt.Sprintf("k%016x%016x", r.Uint64(), r.Uint64())
		if resp := get(t, c, g.url("/fine"), map[string]string{"X-API-Key": key}); resp.Status != 200 {
			t.Fatalf("request %d: %s", i, resp)
		}
	}
	m := scrape(t, g, "")
	held := m.family("tollgate_store_memory_bytes")
	if len(held) != 1 {
		t.Fatalf("no memory bytes gauge:%s", held)
	}
	for _, v := range held {
		if v <= 0 || v > maxBytes {
			t.Fatalf("tollgate_store_memory_bytes = %v, want in (0, %d]", v, maxBytes)
		}
	}
	var evicted float64
	for _, v := range m.family("tollgate_store_memory_evictions_total") {
		evicted += v
	}
	if evicted == 0 {
		t.Fatalf("no evictions after 5,000 keys of ~29 KB under 16 MiB:%s", m.family("tollgate_store_memory_evictions_total"))
	}
	// The live heap after a forced collection holds the counters (at most
	// the bound) and their index; unbounded, the 5,000 keys alone are
	// about 150 MB.
	heapGrown := liveHeap(t, g) - heap0
	if heapGrown > 2*maxBytes {
		t.Fatalf("live heap grew by %d KiB for a 16 MiB bound", heapGrown>>10)
	}
	t.Logf("live heap grew by %d KiB", heapGrown>>10)
	// Resident memory also holds garbage between collections (about twice
	// the live data). Under the race detector it holds shadow memory too,
	// several times the heap, so only a plain build is held to this bound.
	if raceEnabled {
		return
	}
	if grown := rssKB(t, g) - rss0; grown > 80<<10 {
		t.Fatalf("resident memory grew by %d KiB for a 16 MiB bound", grown)
	} else {
		t.Logf("resident memory grew by %d KiB; %v bytes held; %v evictions", grown, held, evicted)
	}
}
