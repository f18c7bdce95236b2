package headers

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// oldDeny is the sequence WriteTooManyRequests stands for.
func oldDeny(w http.ResponseWriter, hits []ratelimit.Hit, ds []ratelimit.Decision) {
	p := TooManyRequests(hits, ds)
	if p.RetryAfter > 0 {
		w.Header()["Retry-After"] = IntValue(p.RetryAfter)
	}
	WriteProblem(w, p)
}

// TestWriteTooManyRequestsMatches compares the fast writer with the
// problem it stands for on hand-picked and random denials: several limits,
// shadow ones, repeated names, costs above capacity, allowed decisions,
// concurrency limits, and names that need escaping in JSON or in Go
// quoting.
func TestWriteTooManyRequestsMatches(t *testing.T) {
	names := []string{"per-client", "api.v2:search_1", "del\x7f", `q"uote`, `back\slash`, "<html>&", "tab\tnl\n", "é-ünï", "\u2028sep", "bad\xffutf8", ""}
	algs := []ratelimit.Algorithm{ratelimit.SlidingWindowCounter, ratelimit.Concurrency, ratelimit.GCRA}
	rng := rand.New(rand.NewPCG(1, 2))
	var wr Writer
	check := func(hits []ratelimit.Hit, ds []ratelimit.Decision) {
		t.Helper()
		a, b := httptest.NewRecorder(), httptest.NewRecorder()
		a.Header()["Ratelimit"] = []string{"kept"}
		b.Header()["Ratelimit"] = []string{"kept"}
		wr.WriteTooManyRequests(a, hits, ds)
		oldDeny(b, hits, ds)
		if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
			t.Fatalf("hits %+v decisions %+v:\nfast %d %v %q\nwant %d %v %q", hits, ds,
				a.Code, a.Header(), a.Body.String(), b.Code, b.Header(), b.Body.String())
		}
	}
	// By hand: one plain denial, and one behind an allowed limit and a
	// denying shadow limit, with the denying name twice.
	l := &ratelimit.Limit{Name: "per-client", Algorithm: ratelimit.SlidingWindowCounter}
	sh := &ratelimit.Limit{Name: "shadowed", Shadow: true}
	check([]ratelimit.Hit{{Limit: l}}, []ratelimit.Decision{{Limit: 1, RetryAfter: 7199 * time.Second}})
	check([]ratelimit.Hit{{Limit: sh}, {Limit: l}, {Limit: l}, {Limit: &ratelimit.Limit{Name: "ok"}}},
		[]ratelimit.Decision{{}, {RetryAfter: time.Millisecond}, {RetryAfter: 3 * time.Second}, {Allowed: true}})
	for range 20000 {
		n := 1 + rng.IntN(4)
		hits := make([]ratelimit.Hit, n)
		ds := make([]ratelimit.Decision, n-rng.IntN(2)) // sometimes fewer decisions than hits
		for i := range hits {
			hits[i] = ratelimit.Hit{Limit: &ratelimit.Limit{Name: names[rng.IntN(len(names))],
				Algorithm: algs[rng.IntN(len(algs))], Shadow: rng.IntN(4) == 0}, Cost: rng.Int64N(5)}
			if rng.IntN(10) == 0 {
				hits[i].Limit = nil
			}
		}
		for i := range ds {
			ds[i] = ratelimit.Decision{Allowed: rng.IntN(3) == 0, Never: rng.IntN(8) == 0, Limit: 1 + rng.Int64N(3),
				Remaining: rng.Int64N(3), RetryAfter: time.Duration(rng.Int64N(int64(3 * time.Hour)))}
		}
		check(hits, ds)
	}
}

// TestWriteTooManyRequestsReuse: a one-limit denial answered from the
// last body kept is byte for byte the problem it stands for, whichever
// limit and wait came before (a few limits and waits in turn, so that
// the kept body is reused often and replaced often).
func TestWriteTooManyRequestsReuse(t *testing.T) {
	limits := []*ratelimit.Limit{
		{Name: "per-client", Algorithm: ratelimit.SlidingWindowCounter},
		{Name: "per-client", Algorithm: ratelimit.Concurrency}, // same name, other detail
		{Name: `q"uote`, Algorithm: ratelimit.GCRA},
		{Name: "shadowed", Shadow: true},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	reused := 0
	var wr Writer
	for range 5000 {
		hits := []ratelimit.Hit{{Limit: limits[rng.IntN(len(limits))]}}
		ds := []ratelimit.Decision{{Limit: 1, RetryAfter: time.Duration(1+rng.IntN(3)) * time.Second}}
		before := wr.lastTooMany.Load()
		a, b := httptest.NewRecorder(), httptest.NewRecorder()
		wr.WriteTooManyRequests(a, hits, ds)
		if wr.lastTooMany.Load() == before {
			reused++
		}
		oldDeny(b, hits, ds)
		if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
			t.Fatalf("limit %+v wait %v:\nfast %d %v %q\nwant %d %v %q", *hits[0].Limit, ds[0].RetryAfter,
				a.Code, a.Header(), a.Body.String(), b.Code, b.Header(), b.Body.String())
		}
	}
	// 12 (limit, wait) pairs drawn at random: about one in twelve repeats.
	if reused < 200 {
		t.Errorf("the kept body was reused %d times in 5000 denials", reused)
	}
}

// discard is a ResponseWriter that keeps nothing but its header map.
type discard struct{ h http.Header }

func (w *discard) Header() http.Header         { return w.h }
func (w *discard) WriteHeader(int)             {}
func (w *discard) Write(b []byte) (int, error) { return len(b), nil }

// TestWriteTooManyRequestsAllocs: the usual denial builds no strings.
func TestWriteTooManyRequestsAllocs(t *testing.T) {
	hits := []ratelimit.Hit{{Limit: &ratelimit.Limit{Name: "per-client"}}}
	ds := []ratelimit.Decision{{Limit: 1, RetryAfter: 7199 * time.Second}}
	w := &discard{h: http.Header{}}
	var wr Writer
	wr.WriteTooManyRequests(w, hits, ds)
	if n := testing.AllocsPerRun(100, func() { wr.WriteTooManyRequests(w, hits, ds) }); n != 0 {
		t.Errorf("%v allocations per denial, want 0", n)
	}
}

// BenchmarkDeny is the 429 answer of one denial: the problem built and
// written (TooManyRequests, IntValue, WriteProblem), and the writer that
// stands for them.
//
//	go test -run '^$' -bench Deny -benchmem -count 10 ./headers
func BenchmarkDeny(b *testing.B) {
	hits := []ratelimit.Hit{{Limit: &ratelimit.Limit{Name: "per-client"}}}
	ds := []ratelimit.Decision{{Limit: 1, RetryAfter: 7199 * time.Second}}
	for _, c := range []struct {
		name string
		f    func(http.ResponseWriter, []ratelimit.Hit, []ratelimit.Decision)
	}{{"problem", oldDeny}, {"writer", new(Writer).WriteTooManyRequests}} {
		b.Run(c.name, func(b *testing.B) {
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.f(w, hits, ds)
			}
		})
	}
}

// TestSetDeniedReuse: Set answers a repeated denial with the values it
// kept, and never with kept values that differ from what it would build.
func TestSetDeniedReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	limits := []*ratelimit.Limit{limit(t, "a", ratelimit.SlidingWindowCounter, "1/hour"),
		limit(t, "b", ratelimit.GCRA, "5/second", "100/minute")}
	styleSets := []Styles{{IETF}, {IETF, Legacy, X}, {X}, {Legacy}}
	now := time.Unix(1700000000, 0)
	var wr Writer
	for i := range 5000 {
		l := limits[rng.IntN(len(limits))]
		hits := []ratelimit.Hit{{Limit: l}}
		ds := []ratelimit.Decision{{Allowed: rng.IntN(4) == 0, Limit: 5, Remaining: rng.Int64N(2),
			Window: rng.IntN(len(l.Rates)), RetryAfter: time.Duration(rng.IntN(3)) * time.Second,
			Reset: time.Duration(rng.IntN(3)) * time.Second}}
		styles := styleSets[rng.IntN(len(styleSets))]
		policy := []string{"", PolicyValue([]*ratelimit.Limit{l})}[rng.IntN(2)]
		at := now.Add(time.Duration(rng.IntN(2)) * time.Second)
		got := http.Header{}
		wr.Set(got, styles, policy, hits, ds, at)
		want := http.Header{}
		new(Writer).Set(want, styles, policy, hits, ds, at) // built, nothing kept
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: %v, want %v", i, got, want)
		}
		for k, v := range got {
			if cap(v) != 1 {
				t.Fatalf("step %d: %s has capacity %d: an append would write into a shared value", i, k, cap(v))
			}
		}
	}
	hits := []ratelimit.Hit{{Limit: limits[0]}}
	ds := []ratelimit.Decision{{Limit: 1, RetryAfter: time.Hour, Reset: time.Hour}}
	h := http.Header{}
	wr.Set(h, Styles{IETF}, "p", hits, ds, now)
	if n := testing.AllocsPerRun(100, func() { wr.Set(h, Styles{IETF}, "p", hits, ds, now) }); n != 0 {
		t.Errorf("a repeated denial: %v allocations, want 0", n)
	}
}

// TestDenialReuseConcurrent: many goroutines denied by different limits at
// once (a limit and its renamed copy after a reload, two windows, shadow
// and enforced, several waits and header styles) each get the headers and
// body of their own denial, never the kept one of another: every answer is
// compared with one built without the kept values.
func TestDenialReuseConcurrent(t *testing.T) {
	limits := []*ratelimit.Limit{
		limit(t, "a", ratelimit.SlidingWindowCounter, "1/hour"),
		limit(t, "a-renamed", ratelimit.SlidingWindowCounter, "1/hour"), // the same limit after a reload
		limit(t, "b", ratelimit.GCRA, "5/second", "100/minute"),
		limit(t, `q"uote`, ratelimit.FixedWindow, "3/minute"),
	}
	shadow := limit(t, "a", ratelimit.SlidingWindowCounter, "1/hour")
	shadow.Shadow = true
	styleSets := []Styles{{IETF}, {IETF, Legacy, X}, {X}, {Legacy, IETF}}
	now := time.Unix(1700000000, 0)
	type denial struct {
		hits             []ratelimit.Hit
		ds               []ratelimit.Decision
		styles           Styles
		policy           string
		at               time.Time
		header           http.Header
		tooManyReference *httptest.ResponseRecorder
	}
	var cases []*denial
	rng := rand.New(rand.NewPCG(7, 8))
	for range 64 {
		l := limits[rng.IntN(len(limits))]
		c := &denial{
			hits: []ratelimit.Hit{{Limit: l}},
			ds: []ratelimit.Decision{{Limit: 5, Window: rng.IntN(len(l.Rates)),
				RetryAfter: time.Duration(1+rng.IntN(3)) * time.Second, Reset: time.Duration(rng.IntN(3)) * time.Second}},
			styles: styleSets[rng.IntN(len(styleSets))],
			policy: []string{"", PolicyValue([]*ratelimit.Limit{l})}[rng.IntN(2)],
			at:     now.Add(time.Duration(rng.IntN(2)) * time.Second),
		}
		if rng.IntN(4) == 0 {
			// A shadow limit that denies beside the enforced one: the
			// answer names the enforced one only.
			c.hits = append(c.hits, ratelimit.Hit{Limit: shadow})
			c.ds = append(c.ds, ratelimit.Decision{Limit: 1, RetryAfter: time.Hour})
		}
		c.header = http.Header{}
		new(Writer).Set(c.header, c.styles, c.policy, c.hits, c.ds, c.at) // built, nothing kept
		c.tooManyReference = httptest.NewRecorder()
		oldDeny(c.tooManyReference, c.hits, c.ds)
		cases = append(cases, c)
	}
	var wg sync.WaitGroup
	var wr Writer // shared by every goroutine, as a handler's is
	errs := make(chan string, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 2000 {
				c := cases[rng.IntN(len(cases))]
				h := http.Header{}
				wr.Set(h, c.styles, c.policy, c.hits, c.ds, c.at)
				if !reflect.DeepEqual(h, c.header) {
					errs <- fmt.Sprintf("headers %v, want %v", h, c.header)
					return
				}
				w := httptest.NewRecorder()
				wr.WriteTooManyRequests(w, c.hits, c.ds)
				ref := c.tooManyReference
				if w.Code != ref.Code || !reflect.DeepEqual(w.Header(), ref.Header()) || w.Body.String() != ref.Body.String() {
					errs <- fmt.Sprintf("429 %d %v %q, want %d %v %q", w.Code, w.Header(), w.Body, ref.Code, ref.Header(), ref.Body)
					return
				}
				// A later writer appending to a value must not reach
				// the kept one.
				h[hRateLimit] = append(h[hRateLimit], "appended")
				w.Header()["Content-Length"] = append(w.Header()["Content-Length"], "appended")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
