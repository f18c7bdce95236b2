package memstore_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// randomKey returns a key shaped like the gateway's ({TAG}HASH, 46 bytes).
func randomKey(r *rand.Rand) string {
	const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := make([]byte, 46)
	for i := range b {
		b[i] = abc[r.IntN(len(abc))]
	}
	b[0], b[23] = '{', '}'
	return string(b)
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMaxBytes (issue: max_keys bounds the number of counters, not their
// memory; 1000/1h with precision 1s is ~29 KB a key, so 5,000 random keys
// took 170 MB): with MaxBytes set, 5,000 random keys of that limit stay
// under it, by the store's account and by the heap, and the keys that do
// not fit are evicted least recently used first.
func TestMaxBytes(t *testing.T) {
	l := &ratelimit.Limit{Name: "fine", Algorithm: ratelimit.SlidingWindowCounter, Precision: time.Second,
		Rates: []ratelimit.Rate{{Limit: 1000, Window: time.Hour}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	const maxBytes = 16 << 20
	perKey := memstore.KeyBytes(l)
	if perKey < 8*3601 {
		t.Fatalf("KeyBytes = %d, less than the 3,601 buckets of 8 bytes it holds", perKey)
	}
	r := rand.New(rand.NewPCG(3, 4))
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = randomKey(r)
	}
	before := heapAlloc()
	s := memstore.New(memstore.Options{MaxBytes: maxBytes, Shards: 4})
	ctx := context.Background()
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	for i, k := range keys {
		if ok, err := s.Decide(ctx, t0.Add(time.Duration(i)*time.Millisecond), []ratelimit.Hit{{Limit: l, Key: k, Cost: 1}}, out); !ok || err != nil {
			t.Fatalf("key %d: %v %v", i, ok, err)
		}
		if b := s.Bytes(); b > maxBytes {
			t.Fatalf("after key %d: %d bytes charged, more than MaxBytes %d", i, b, maxBytes)
		}
	}
	grown := int64(heapAlloc() - before)
	t.Logf("%d keys held of 5000, %d bytes charged (%d a key), heap grew %d bytes, %d evictions",
		s.Len(), s.Bytes(), perKey, grown, s.Evictions())
	if s.Len() >= len(keys) || s.Evictions() == 0 {
		t.Fatalf("%d keys held, %d evictions: nothing was evicted", s.Len(), s.Evictions())
	}
	if fit := maxBytes/perKey - 4*2; int64(s.Len()) < fit {
		t.Errorf("%d keys held, fewer than the %d that fit", s.Len(), fit)
	}
	// The account matches the heap: what the store holds is within a
	// quarter of what it is charged (and the bound holds on the heap).
	if grown > maxBytes*5/4 {
		t.Errorf("heap grew by %d bytes, more than MaxBytes %d allows", grown, maxBytes)
	}
	if grown < s.Bytes()*3/4 {
		t.Errorf("heap grew by %d bytes but %d are charged: the account overstates", grown, s.Bytes())
	}
	// The most recent keys are the ones kept.
	for _, k := range keys[len(keys)-10:] {
		u, err := s.Usage(ctx, t0.Add(time.Hour/2), l, k)
		if err != nil || u[0].Used == 0 {
			t.Fatalf("recent key %s: usage %v, %v; want it kept", k, u, err)
		}
	}
	runtime.KeepAlive(keys)
}

// TestMaxBytesGrowingLog: a sliding log's ring grows with the units
// counted, after its key was stored; the growth is charged as it happens,
// so a few busy keys cannot take more than MaxBytes either.
func TestMaxBytesGrowingLog(t *testing.T) {
	l := &ratelimit.Limit{Name: "log", Algorithm: ratelimit.SlidingWindowLog,
		Rates: []ratelimit.Rate{{Limit: 100_000, Window: time.Hour}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	const maxBytes = 1 << 20 // 256 KiB a shard
	s := memstore.New(memstore.Options{MaxBytes: maxBytes, Shards: 4})
	ctx := context.Background()
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]ratelimit.Decision, 1)
	r := rand.New(rand.NewPCG(5, 6))
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = randomKey(r)
	}
	for i := range 200_000 {
		k := keys[r.IntN(len(keys))]
		if _, err := s.Decide(ctx, t0.Add(time.Duration(i)*time.Millisecond), []ratelimit.Hit{{Limit: l, Key: k, Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
		if b := s.Bytes(); b > maxBytes {
			t.Fatalf("after request %d: %d bytes charged, more than MaxBytes %d", i, b, maxBytes)
		}
	}
	if s.Evictions() == 0 {
		t.Fatalf("40 keys of ~80 KB each fit in 1 MiB: the growth was not charged (%d bytes, %d keys)", s.Bytes(), s.Len())
	}
	t.Logf("%d keys held, %d bytes charged, %d evictions", s.Len(), s.Bytes(), s.Evictions())
}

// TestDefaultMaxBytes: the default bound is a quarter of the machine's
// memory (or 1 GiB when it is unknown), and never zero.
func TestDefaultMaxBytes(t *testing.T) {
	m, d := memstore.MachineMemory(), memstore.DefaultMaxBytes()
	switch {
	case m > 0 && d != m/memstore.DefaultMaxBytesFraction:
		t.Fatalf("DefaultMaxBytes = %d, machine %d", d, m)
	case m == 0 && d != 1<<30:
		t.Fatalf("DefaultMaxBytes = %d with unknown machine memory", d)
	}
	t.Logf("machine %d bytes, default bound %d", m, d)
}
