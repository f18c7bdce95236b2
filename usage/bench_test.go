package usage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// BenchmarkObserve is the request path's cost of the export: one event
// of a consumer with a fixed-window and a quota hit, added to the
// aggregate (1000 consumers, in parallel); the sink accepts everything.
func BenchmarkObserve(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	e, err := New(Options{Sink: srv.URL, FlushInterval: time.Hour, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	fw := &ratelimit.Limit{Name: "calls", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 1e9, Window: time.Hour}}}
	q := &ratelimit.Limit{Name: "monthly", Algorithm: ratelimit.Quota, Rates: []ratelimit.Rate{{Limit: 1e9, Window: ratelimit.MonthWindow}}}
	for _, l := range []*ratelimit.Limit{fw, q} {
		if err := l.Finish(); err != nil {
			b.Fatal(err)
		}
	}
	e.SetNotify(map[string][]float64{"monthly": {0.8, 1}})
	consumers := make([]string, 1000)
	for i := range consumers {
		consumers[i] = "consumer-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ev := &proxy.Event{Start: time.Now(), Plan: "pro",
			Hits:      []ratelimit.Hit{{Limit: fw, Cost: 1}, {Limit: q, Cost: 1}},
			Decisions: []ratelimit.Decision{{Allowed: true, Counted: true, Limit: 1e9, Remaining: 1e8}, {Allowed: true, Counted: true, Limit: 1e9, Remaining: 1e8}}}
		i := 0
		for pb.Next() {
			ev.Consumer = consumers[i%len(consumers)]
			i++
			e.Observe(ev)
		}
	})
	b.StopTimer()
	// The process's CPU time per event: on a loaded machine the wall
	// time per op says more about the neighbours than about Observe.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
