package replay

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
)

// slowFirst is one client's requests on route web (per-client: 3 per 10 s,
// sliding log) in the order the access log writes them, by finish: fast
// requests at 7.0, 7.1, 7.2 and 8.5 s, then the slow one that started at
// 0.5 s and took 9 s, then one at 10.6 s. In time order: 0.5, 7.0, 7.1
// allowed, 7.2 and 8.5 denied (three in the last 10 s), 10.6 allowed (7.0,
// 7.1 in (0.6, 10.6]): 4 allowed, 2 denied. In file order the slow request
// is decided after three admitted requests that started after it.
func slowFirst() []accesslog.Entry {
	var es []accesslog.Entry
	for _, l := range []struct{ at, latency time.Duration }{
		{7 * time.Second, time.Millisecond}, {7100 * time.Millisecond, time.Millisecond},
		{7200 * time.Millisecond, time.Millisecond}, {8500 * time.Millisecond, time.Millisecond},
		{500 * time.Millisecond, 9 * time.Second}, {10600 * time.Millisecond, time.Millisecond},
	} {
		e := entry(l.at, "198.51.100.1", "", "web", "/web/x")
		e.Latency = l.latency
		es = append(es, e)
	}
	return es
}

// pipe hides the reader's Seek method, as a pipe has none.
type pipe struct{ io.Reader }

func TestRunDecidesInTimeOrder(t *testing.T) {
	tests := []struct {
		name            string
		pipe            bool
		window          time.Duration
		allowed, denied int64
		late            int64
		reportedWindow  time.Duration
	}{
		// A seekable log is read once for its longest latency (9 s).
		{name: "file", allowed: 4, denied: 2, reportedWindow: 9 * time.Second},
		// A pipe cannot be read twice: the window grows with the longest
		// latency seen, and the first line slower than all before it
		// comes too late: 7.0, 7.1 and 7.2 s were decided (allowed) when
		// it was read. It is decided at 7.2 s, the latest instant decided
		// before it: denied, and so are 8.5 and 10.6 s.
		{name: "pipe", pipe: true, allowed: 3, denied: 3, late: 1, reportedWindow: 9 * time.Second},
		{name: "pipe, window set", pipe: true, window: 10 * time.Second, allowed: 4, denied: 2, reportedWindow: 10 * time.Second},
	}
	for _, f := range []accesslog.Format{accesslog.Combined, accesslog.JSONL} {
		for _, tc := range tests {
			t.Run(f.String()+"/"+tc.name, func(t *testing.T) {
				var log io.Reader = bytes.NewReader(writeLog(t, f, slowFirst()))
				if tc.pipe {
					log = pipe{log}
				}
				rep, err := Run(context.Background(), testPolicy(t), log, Options{Format: f, ReorderWindow: tc.window})
				if err != nil {
					t.Fatal(err)
				}
				pc := limitReport(t, rep, "per-client")
				if pc.Allowed != tc.allowed || pc.Denied != tc.denied || rep.Late != tc.late || rep.ReorderWindow != tc.reportedWindow {
					t.Errorf("allowed %d denied %d late %d window %s; want %d %d %d %s",
						pc.Allowed, pc.Denied, rep.Late, rep.ReorderWindow, tc.allowed, tc.denied, tc.late, tc.reportedWindow)
				}
				var out strings.Builder
				if err := rep.Write(&out); err != nil {
					t.Fatal(err)
				}
				if tc.late > 0 && !strings.Contains(out.String(), "1 lines came later than that") {
					t.Errorf("report does not say a line came too late:\n%s", out.String())
				}
			})
		}
	}
}

// TestReorderBounded: a line claiming a latency of centuries makes the
// window huge, but the buffer holds no more than its bound; lines past it
// are decided at once, and time still never runs back.
func TestReorderBounded(t *testing.T) {
	o := newReorder(0, true, 8)
	o.push(job{at: base}, time.Duration(1<<63-1))
	released := 0
	var last time.Time
	for i := range 1000 {
		o.push(job{at: base.Add(time.Duration(i) * time.Millisecond)}, time.Millisecond)
		for j, ok := o.pop(false); ok; j, ok = o.pop(false) {
			if j.at.Before(last) {
				t.Fatalf("released %s after %s", j.at, last)
			}
			last = j.at
			released++
		}
		if len(o.jobs) > 9 {
			t.Fatalf("buffer holds %d jobs, bound 8", len(o.jobs))
		}
	}
	if released < 990 {
		t.Errorf("released %d of 1001 before the end", released)
	}

	// Through Run: the same log, every line decided.
	es := slowFirst()
	es[0].Latency = 100 * 365 * 24 * time.Hour
	rep, err := Run(context.Background(), testPolicy(t), bytes.NewReader(writeLog(t, accesslog.JSONL, es)),
		Options{Format: accesslog.JSONL, MaxBuffered: 2})
	if err != nil || rep.Requests != 6 {
		t.Fatalf("requests %d, err %v", rep.Requests, err)
	}
}

// TestJobHeapOrder: jobs come out by start, ties in line order, against a
// sort of the same jobs.
func TestJobHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h jobHeap
	var want []job
	for i := range 2000 {
		j := job{at: base.Add(time.Duration(rng.IntN(50)) * time.Millisecond), seq: int64(i)}
		h.push(j)
		want = append(want, j)
		if rng.IntN(3) == 0 { // interleave pops, as the buffer does
			got := h.pop()
			sort.SliceStable(want, func(a, b int) bool { return want[a].at.Before(want[b].at) })
			if got.at != want[0].at || got.seq != want[0].seq {
				t.Fatalf("pop %d: got (%s, %d), want (%s, %d)", i, got.at, got.seq, want[0].at, want[0].seq)
			}
			want = want[1:]
		}
	}
	sort.SliceStable(want, func(a, b int) bool { return want[a].at.Before(want[b].at) })
	for k := range want {
		if got := h.pop(); got.at != want[k].at || got.seq != want[k].seq {
			t.Fatalf("drain %d: got (%s, %d), want (%s, %d)", k, got.at, got.seq, want[k].at, want[k].seq)
		}
	}
}
