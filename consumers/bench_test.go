package consumers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// registryOf compiles a registry of n consumers, the key of consumer i
// being keyOf(i).
func registryOf(tb testing.TB, n int, keyOf func(int) string) *Registry {
	tb.Helper()
	f := &File{Consumers: make([]Entry, n)}
	for i := range f.Consumers {
		s := sha256.Sum256([]byte(keyOf(i)))
		f.Consumers[i] = Entry{Name: fmt.Sprintf("c%d", i), APIKeysSHA256: []string{hex.EncodeToString(s[:])}}
	}
	r, err := Compile("consumers.toml", f, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// BenchmarkByKey is the lookup alone: a 31-byte key (known, unknown) and
// a 200-byte key against registries of 1 and 100,000 consumers.
func BenchmarkByKey(b *testing.B) {
	keyOf := func(i int) string { return fmt.Sprintf("key-%06d-xxxxxxxxxxxxxxxxxxxx", i) }
	long := fmt.Sprintf("%0200d", 7)
	for _, n := range []int{1, 100000} {
		r := registryOf(b, n, keyOf)
		for _, k := range []struct{ name, key string }{{"known", keyOf(0)}, {"unknown", keyOf(n + 1)}, {"unknown-200B", long}} {
			b.Run(fmt.Sprintf("%d/%s", n, k.name), func(b *testing.B) {
				b.ReportAllocs()
				cpu0, n := cpuTime(), 0
				for ; b.Loop(); n++ {
					_ = r.ByKey(k.key)
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkHash is the SHA-256 of a 31-byte key alone, the floor of ByKey.
func BenchmarkHash(b *testing.B) {
	key := []byte("key-000000-xxxxxxxxxxxxxxxxxxxx")
	b.ReportAllocs()
	var s [32]byte
	cpu0, n := cpuTime(), 0
	for ; b.Loop(); n++ {
		s = sha256.Sum256(key)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
	_ = s
}

// cpuTime is the process's user and system CPU time so far: on a loaded
// machine wall-clock ns/op counts the time other processes ran.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
