package keys

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"
)

var testNow = time.Unix(1_700_000_000, 0)

// TestKeyMatchesAppendKey: Key, cached or not, returns what AppendKey
// builds, over random identities and parts repeated in random order (so
// that entries are made, hit, collide in their slots and are replaced),
// and inputs too long to cache.
func TestKeyMatchesAppendKey(t *testing.T) {
	e, err := NewExtractor(Config{Sources: []Source{SourceAPIKey, SourceIP}})
	if err != nil {
		t.Fatal(err)
	}
	partSets := [][]Part{
		{{Kind: PartClient}},
		{{Kind: PartAPIKey}},
		{{Kind: PartIP}, {Kind: PartRoute}},
		{{Kind: PartClient}, {Kind: PartMethod}},
		{{Kind: PartHeader, Header: "X-Tenant"}, {Kind: PartClient}},
		nil,
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		n := rng.IntN(3000) // more inputs than slots: collisions
		long := n%50 == 0
		key := fmt.Sprintf("key-%d", n)
		if long {
			key += fmt.Sprintf("%0300d", n)
		}
		r, _ := http.NewRequest("GET", "http://gw/x", nil)
		r.RemoteAddr = fmt.Sprintf("10.0.%d.%d:4000", n%7, n%251)
		r.Header.Set("X-API-Key", key)
		r.Header.Set("X-Tenant", fmt.Sprintf("t%d", n%5))
		id := e.Identify(r, testNow)
		parts := partSets[n%len(partSets)]
		v := &Values{Route: fmt.Sprintf("r%d", n%3), Method: "GET", Header: r.Header}
		want := string(e.AppendKey(nil, parts, &id, v))
		if got := e.Key(parts, &id, v); got != want {
			t.Fatalf("request %d (input %d, parts %v): Key %q, AppendKey %q", i, n, parts, got, want)
		}
	}
}

// TestKeyCacheHits: a key asked for again and again is served from the
// cache without allocating; keys that never repeat in a row make no
// entries.
func TestKeyCacheHits(t *testing.T) {
	e, err := NewExtractor(Config{Sources: []Source{SourceAPIKey, SourceIP}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("GET", "http://gw/x", nil)
	r.RemoteAddr = "10.0.0.1:4000"
	r.Header.Set("X-API-Key", "hot-key")
	id := e.Identify(r, testNow)
	parts := []Part{{Kind: PartClient}}
	v := &Values{}
	e.Key(parts, &id, v)
	e.Key(parts, &id, v) // the second miss makes the entry
	if a := testing.AllocsPerRun(100, func() { e.Key(parts, &id, v) }); a != 0 {
		t.Errorf("a cached key allocates %v times", a)
	}
	// A fresh cache, keys that rotate: no entries.
	e.keys = newKeyCache()
	for i := range 5000 {
		r.Header.Set("X-API-Key", fmt.Sprintf("k%d", i))
		id := e.Identify(r, testNow)
		e.Key(parts, &id, v)
	}
	for i := range e.keys.slots {
		if e.keys.slots[i].entry.Load() != nil {
			t.Fatalf("slot %d holds an entry after 5,000 keys seen once each", i)
		}
	}
}

// TestKeyConcurrent: goroutines asking for overlapping keys all get
// AppendKey's answer (run with -race).
func TestKeyConcurrent(t *testing.T) {
	e, err := NewExtractor(Config{Sources: []Source{SourceAPIKey, SourceIP}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				r, _ := http.NewRequest("GET", "http://gw/x", nil)
				r.RemoteAddr = "10.0.0.1:4000"
				r.Header.Set("X-API-Key", fmt.Sprintf("k%d", (i+g)%40))
				id := e.Identify(r, testNow)
				parts := []Part{{Kind: PartClient}}
				want := string(e.AppendKey(nil, parts, &id, &Values{}))
				if got := e.Key(parts, &id, &Values{}); got != want {
					t.Errorf("Key %q, AppendKey %q", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkCounterKey is the decision path's counter key of one client
// repeating its requests ("hot") and of a client per request ("rotating",
// 10,000 keys): "string" builds it as the path did before (AppendKey and
// a string), "Key" asks the cache.
//
//	go test -run '^$' -bench CounterKey -benchmem ./keys
func BenchmarkCounterKey(b *testing.B) {
	e, err := NewExtractor(Config{Sources: []Source{SourceAPIKey, SourceIP}})
	if err != nil {
		b.Fatal(err)
	}
	parts := []Part{{Kind: PartClient}}
	ids := make([]Identity, 10000)
	for i := range ids {
		r, _ := http.NewRequest("GET", "http://gw/x", nil)
		r.RemoteAddr = "10.0.0.1:4000"
		r.Header.Set("X-API-Key", fmt.Sprintf("key-%d", i))
		ids[i] = e.Identify(r, testNow)
	}
	for _, load := range []struct {
		name string
		n    int
	}{{"hot", 1}, {"rotating", len(ids)}} {
		b.Run(load.name+"/string", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			i := 0
			for b.Loop() {
				buf = e.AppendKey(buf[:0], parts, &ids[i%load.n], &Values{})
				_ = string(buf)
				i++
			}
		})
		b.Run(load.name+"/Key", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = e.Key(parts, &ids[i%load.n], &Values{})
				i++
			}
		})
	}
}
