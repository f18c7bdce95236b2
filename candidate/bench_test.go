package candidate

import (
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// benchServe serves allowed requests of 1000 clients through a handler on
// the memory store, with a candidate of the same shape when candidate.
func benchServe(b *testing.B, candidate bool) {
	live := testPolicy(b, "1000000/minute")
	h, err := proxy.New(live, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	if candidate {
		s := NewStats(time.Now(), nil)
		h.SetCandidate(&proxy.Candidate{Policy: testPolicy(b, "2000000/minute"), Store: memstore.New(memstore.Options{}), Record: s.Record})
	}
	r := httptest.NewRequest("GET", "/api/x", nil)
	w := httptest.NewRecorder()
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = "10.0." + itoa(i/256) + "." + itoa(i%256) + ":1234"
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		r.RemoteAddr = addrs[i%len(addrs)]
		w.Body.Reset()
		h.ServeHTTP(w, r)
	}
	// CPU time of the process per request: unlike ns/op, it does not grow
	// with what else the machine runs.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// BenchmarkServeLive is one request decided by one live limit.
func BenchmarkServeLive(b *testing.B) { benchServe(b, false) }

// BenchmarkServeWithCandidate is the same request also decided by a
// candidate of one limit: the difference is the candidate's cost.
func BenchmarkServeWithCandidate(b *testing.B) { benchServe(b, true) }
