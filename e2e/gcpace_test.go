package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// nextGC forces a collection in g and returns the heap size at which its
// next collection starts (runtime.MemStats.NextGC, from the heap profile).
func nextGC(t testing.TB, g *gw) int64 {
	t.Helper()
	if r := adminDo(t, g, "GET", "/debug/pprof/heap?gc=1", ""); r.Status != 200 {
		t.Fatalf("forced GC: %s", r)
	}
	r := adminDo(t, g, "GET", "/debug/pprof/heap?debug=1", "")
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "# NextGC = "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("NextGC %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no NextGC in the heap profile:\n%.500s", r.Body)
	return 0
}

// waitNextGC polls nextGC until ok accepts it, for up to 10 s (the goal
// is adjusted after a collection, by a cleanup that runs a moment later).
func waitNextGC(t testing.TB, g *gw, what string, ok func(int64) bool) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := nextGC(t, g)
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("next collection at %d KiB, want %s", n>>10, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGCMinHeap: through the binary, server.gc_min_heap sets the heap at
// which the collector starts (about the configured bytes while little is
// live), a reload to 0 gives Go's pacing back at once (a 4 MiB minimum),
// a reload back applies again, and a GOGC environment variable wins over
// the key.
func TestGCMinHeap(t *testing.T) {
	t.Parallel()
	const minHeap = 64 << 20
	up := newUpstream(t)
	g := startGateway(t, "gcpace.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL, "MinHeap": minHeap},
		Env: []string{"GOGC="}})
	c := newClient(t, "")
	for i := range 200 {
		if r := get(t, c, g.url("/x"), nil); r.Status != 200 {
			t.Fatalf("request %d: %s", i, r)
		}
	}
	near := func(n int64) bool { return n >= minHeap*9/10 && n <= minHeap*12/10 }
	n := waitNextGC(t, g, "about 64 MiB", near)
	t.Logf("gc_min_heap = 64 MiB: next collection at %d KiB", n>>10)

	g.rewrite(t, map[string]any{"MinHeap": 0})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload: %s", r)
	}
	goPacing := func(n int64) bool { return n < 16<<20 }
	n = waitNextGC(t, g, "Go's own pacing (under 16 MiB)", goPacing)
	t.Logf("gc_min_heap = 0: next collection at %d KiB", n>>10)

	g.rewrite(t, map[string]any{"MinHeap": minHeap})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload: %s", r)
	}
	waitNextGC(t, g, "about 64 MiB again", near)

	// GOGC set: the operator's pacing, the key is not applied.
	g2 := startGateway(t, "gcpace.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL, "MinHeap": minHeap},
		Env: []string{"GOGC=100"}})
	for range 3 {
		if n := nextGC(t, g2); !goPacing(n) {
			t.Fatalf("GOGC=100 and gc_min_heap = 64 MiB: next collection at %d KiB, want under 16 MiB", n>>10)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
