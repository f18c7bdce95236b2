package usage

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// receiver is a sink that keeps each event once by id, as a billing
// receiver would, and answers as fail says for the n-th post.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	byID   map[string]cloudEvent
	posts  int
	dups   int
	auth   []string
	idem   []string
	failFn atomic.Pointer[func(n int, w http.ResponseWriter) bool]
	// ackLost, when it returns true for the n-th post, keeps the events
	// and answers 500: the sender cannot know they arrived.
	ackLost func(n int) bool
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{byID: map[string]cloudEvent{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) fail(f func(n int, w http.ResponseWriter) bool) { rc.failFn.Store(&f) }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.posts++
	n := rc.posts
	rc.auth = append(rc.auth, r.Header.Get("Authorization"))
	rc.idem = append(rc.idem, r.Header.Get("Idempotency-Key"))
	rc.mu.Unlock()
	if f := rc.failFn.Load(); f != nil && (*f)(n, w) {
		return
	}
	var evs []cloudEvent
	if err := json.NewDecoder(r.Body).Decode(&evs); err != nil || r.Header.Get("Content-Type") != "application/cloudevents-batch+json; charset=utf-8" {
		http.Error(w, "bad batch", 400)
		return
	}
	rc.mu.Lock()
	for _, ev := range evs {
		if _, dup := rc.byID[ev.ID]; dup {
			rc.dups++
			continue
		}
		rc.byID[ev.ID] = ev
	}
	rc.mu.Unlock()
	if rc.ackLost != nil && rc.ackLost(n) {
		w.WriteHeader(500)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// totals sums the units of the usage records kept, by consumer/limit.
func (rc *receiver) totals() map[string]int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]int64{}
	for _, ev := range rc.byID {
		if ev.Type != TypeUsage {
			continue
		}
		d := ev.Data.(map[string]any)
		out[d["consumer"].(string)+"/"+d["limit"].(string)] += int64(d["units"].(float64))
	}
	return out
}

func (rc *receiver) notices() []map[string]any {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []map[string]any
	for _, ev := range rc.byID {
		if ev.Type == TypeNotice {
			out = append(out, ev.Data.(map[string]any))
		}
	}
	return out
}

func limit(t *testing.T, name string, alg ratelimit.Algorithm, rates ...ratelimit.Rate) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: name, Algorithm: alg, Rates: rates}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// hitEvent is one request of consumer counted cost units on l.
func hitEvent(consumer string, l *ratelimit.Limit, at time.Time, cost int64, counted bool, remaining int64) *proxy.Event {
	return &proxy.Event{Start: at, Consumer: consumer, Plan: "pro",
		Hits:      []ratelimit.Hit{{Limit: l, Key: "k", Cost: cost}},
		Decisions: []ratelimit.Decision{{Allowed: counted, Counted: counted, Limit: l.Rates[0].Limit, Remaining: remaining}}}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// waitFor polls cond (a hang guard, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFailingSinkRecovers: a sink that answers 500, 503 with Retry-After,
// 429, 408, times out and then recovers receives every unit once, counted
// by id, although the exporter retried batches it may have kept.
func TestFailingSinkRecovers(t *testing.T) {
	rc := newReceiver(t)
	var hang = make(chan struct{})
	defer close(hang)
	rc.fail(func(n int, w http.ResponseWriter) bool {
		switch n {
		case 1:
			w.WriteHeader(500)
		case 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
		case 3:
			w.WriteHeader(429)
		case 4:
			w.WriteHeader(408)
		case 5:
			<-hang // past the exporter's timeout
		default:
			return false
		}
		return true
	})
	rc.ackLost = func(n int) bool { return n == 6 || n == 9 }
	e, err := New(Options{Sink: rc.URL, FlushInterval: 20 * time.Millisecond, Timeout: 200 * time.Millisecond,
		BatchSize: 3, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l := limit(t, "api", ratelimit.FixedWindow, ratelimit.Rate{Limit: 1000, Window: time.Hour})
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	want := map[string]int64{}
	for i := range 400 {
		c := []string{"a", "b", "c", "d", "e"}[i%5]
		cost := int64(i%7 + 1)
		// Spread over periods so that batches hold several records.
		e.Observe(hitEvent(c, l, base.Add(time.Duration(i)*time.Minute), cost, true, 0))
		want[c+"/api"] += cost
		// A denied request and a peek count nothing.
		e.Observe(hitEvent(c, l, base, 5, false, 0))
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // let cycles interleave with requests
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := rc.totals()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: receiver counted %d units, want %d", k, got[k], v)
		}
	}
	st := e.Stats()
	if st.DroppedUnits != 0 || st.DroppedRecords != 0 {
		t.Errorf("dropped %+v", st)
	}
	if st.Failures < 7 {
		t.Errorf("failures = %d, want ≥ 7 (500, 503, 429, 408, timeout, two lost answers)", st.Failures)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.dups == 0 {
		t.Errorf("no batch was posted again after its answer was lost: the test proves nothing about dedup")
	}
	distinct := map[string]bool{}
	for i, k := range rc.idem {
		if k == "" {
			t.Errorf("post %d without Idempotency-Key", i+1)
		}
		if i < 7 && k != rc.idem[0] {
			t.Errorf("post %d (a retry of the first batch) has Idempotency-Key %q, the first had %q", i+1, k, rc.idem[0])
		}
		distinct[k] = true
	}
	if len(distinct) < 2 {
		t.Errorf("every batch had the Idempotency-Key %v", distinct)
	}
}

// TestConnectionRefusedThenUp: a sink that is not listening, then is,
// gets everything; the close flushes.
func TestConnectionRefusedThenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the receiver listens there
	e, err := New(Options{Sink: "http://" + addr + "/ingest", FlushInterval: 10 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l := limit(t, "api", ratelimit.Quota, ratelimit.Rate{Limit: 100, Window: ratelimit.MonthWindow})
	at := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	for range 10 {
		e.Observe(hitEvent("acme", l, at, 3, true, 0))
	}
	waitFor(t, "a failed post", func() bool { return e.Stats().Failures > 0 })
	rc := &receiver{byID: map[string]cloudEvent{}}
	var ln2 net.Listener
	for range 100 { // the port may be taken meanwhile: a hang guard
		if ln2, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ln2 == nil {
		t.Skipf("port %s taken: %v", addr, err)
	}
	rc.Server = &httptest.Server{Listener: ln2, Config: &http.Server{Handler: http.HandlerFunc(rc.serve)}}
	rc.Start()
	defer rc.Close()
	for range 5 {
		e.Observe(hitEvent("acme", l, at, 3, true, 0))
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rc.totals()["acme/api"]; got != 45 {
		t.Errorf("units = %d, want 45", got)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, ev := range rc.byID {
		d := ev.Data.(map[string]any)
		if d["period"] != "month" || d["period_start"] != "2026-03-01T00:00:00Z" || d["period_end"] != "2026-04-01T00:00:00Z" {
			t.Errorf("record period %v %v..%v, want the calendar month", d["period"], d["period_start"], d["period_end"])
		}
	}
}

// TestHostileSinks: answers that are not acceptance. Each row says what
// becomes of the batch: retried until the sink recovers, or dropped
// after rejectAttempts refusals (counted); and nothing the sink does
// holds the exporter past its bounds.
func TestHostileSinks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter, r *http.Request)
		dropped bool // refused: dropped after rejectAttempts; else retried, delivered on recovery
	}{
		{"never answers", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client leave
			<-r.Context().Done()
		}, false},
		{"slow huge body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			chunk := strings.Repeat("x", 32<<10)
			for range 1 << 10 { // 32 MiB, slowly: cut at maxAnswerBytes or the timeout
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				time.Sleep(time.Millisecond)
			}
		}, false},
		{"huge 2xx body", func(w http.ResponseWriter, r *http.Request) {
			// Accepted: the body is not read past maxAnswerBytes.
			w.WriteHeader(200)
			_, _ = io.WriteString(w, strings.Repeat("y", 1<<20))
		}, false},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
		}, true},
		{"400", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(400) }, true},
		{"401", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }, true},
		{"413", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(413) }, true},
		{"429 Retry-After huge", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "999999999")
			w.WriteHeader(429)
		}, false},
		{"500 garbage Retry-After", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "-5, soon")
			w.WriteHeader(500)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t)
			var hostile atomic.Bool
			hostile.Store(true)
			rc.fail(func(n int, w http.ResponseWriter) bool { return false })
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hostile.Load() && !strings.HasPrefix(tc.name, "huge 2xx") {
					tc.answer(w, r)
					return
				}
				if strings.HasPrefix(tc.name, "huge 2xx") {
					rc.serve(&bodyAfter{ResponseWriter: w}, r)
					return
				}
				rc.serve(w, r)
			}))
			defer srv.Close()
			e, err := New(Options{Sink: srv.URL, FlushInterval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			l := limit(t, "api", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Minute})
			e.Observe(hitEvent("acme", l, time.Unix(600, 0), 4, true, 0))
			if tc.dropped {
				waitFor(t, "the batch dropped", func() bool { return e.Stats().DroppedRecords == 1 })
				if st := e.Stats(); st.DroppedUnits != 4 || st.Failures != rejectAttempts {
					t.Errorf("stats %+v, want 4 units dropped after %d refusals", st, rejectAttempts)
				}
			} else if !strings.HasPrefix(tc.name, "huge 2xx") {
				waitFor(t, "two failures", func() bool { return e.Stats().Failures >= 2 })
			}
			hostile.Store(false)
			e.Observe(hitEvent("acme", l, time.Unix(600, 0), 1, true, 0))
			if err := e.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := int64(5)
			if tc.dropped {
				want = 1
			}
			if got := rc.totals()["acme/api"]; got != want {
				t.Errorf("units delivered = %d, want %d", got, want)
			}
		})
	}
}

// bodyAfter makes the receiver's 202 a 200 with a megabyte of body.
type bodyAfter struct{ http.ResponseWriter }

func (b *bodyAfter) WriteHeader(int) {
	b.ResponseWriter.WriteHeader(200)
	_, _ = io.WriteString(b.ResponseWriter, strings.Repeat("y", 1<<20))
}

// TestBoundMergesThenDrops: with the sink down, units of held entries
// merge (nothing lost); a new entry past MaxPending drops its units,
// counted.
func TestBoundMergesThenDrops(t *testing.T) {
	rc := newReceiver(t)
	var down atomic.Bool
	down.Store(true)
	rc.fail(func(n int, w http.ResponseWriter) bool {
		if down.Load() {
			w.WriteHeader(503)
			return true
		}
		return false
	})
	e, err := New(Options{Sink: rc.URL, FlushInterval: time.Hour, MaxPending: 2, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l := limit(t, "api", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Minute})
	at := time.Unix(6000, 0)
	for range 100 {
		e.Observe(hitEvent("a", l, at, 1, true, 0))
		e.Observe(hitEvent("b", l, at, 2, true, 0))
		e.Observe(hitEvent("c", l, at, 3, true, 0)) // a third entry: dropped
	}
	st := e.Stats()
	if st.DroppedUnits != 300 || st.Pending != 2 {
		t.Errorf("stats %+v, want 300 units dropped and 2 entries held", st)
	}
	down.Store(false)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := rc.totals()
	if got["a/api"] != 100 || got["b/api"] != 200 || got["c/api"] != 0 {
		t.Errorf("totals %v", got)
	}
}

// TestRecordOncePerInterval: one key yields one record per cycle however
// many requests it counts, and the sink sees credentials as basic auth.
func TestRecordOncePerInterval(t *testing.T) {
	rc := newReceiver(t)
	u := strings.Replace(rc.URL, "http://", "http://user:s3cret@", 1)
	e, err := New(Options{Sink: u, FlushInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l := limit(t, "api", ratelimit.SlidingWindowLog, ratelimit.Rate{Limit: 10, Window: time.Second},
		ratelimit.Rate{Limit: 100, Window: time.Hour})
	for i := range 50 {
		e.Observe(hitEvent("acme", l, time.Unix(7200, 0).Add(time.Duration(i)*time.Second), 1, true, 0))
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.byID) != 1 {
		t.Fatalf("%d records, want 1 (the hour window's period)", len(rc.byID))
	}
	for _, ev := range rc.byID {
		d := ev.Data.(map[string]any)
		if d["units"].(float64) != 50 || d["requests"].(float64) != 50 || d["period"] != "1h0m0s" ||
			d["period_start"] != "1970-01-01T02:00:00Z" || ev.Subject != "acme" || ev.SpecVersion != "1.0" {
			t.Errorf("record %+v", ev)
		}
	}
	if rc.auth[0] != "Basic dXNlcjpzM2NyZXQ=" {
		t.Errorf("Authorization = %q", rc.auth[0])
	}
}

// TestThresholdsOncePerPeriod: each fraction is noticed once per period;
// a new period notices again.
func TestThresholdsOncePerPeriod(t *testing.T) {
	rc := newReceiver(t)
	e, err := New(Options{Sink: rc.URL, FlushInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetNotify(map[string][]float64{"q": {0.5, 0.8, 1}})
	l := limit(t, "q", ratelimit.Quota, ratelimit.Rate{Limit: 10, Window: 24 * time.Hour})
	day := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	for used := int64(1); used <= 10; used++ {
		e.Observe(hitEvent("acme", l, day, 1, true, 10-used))
	}
	e.Observe(hitEvent("acme", l, day, 1, false, 0)) // denied at the limit: 1.0 already noticed
	e.Observe(hitEvent("acme", l, day.Add(24*time.Hour), 1, true, 1))
	// In a penalty box on the third day: nothing checked, nothing noticed.
	pen := hitEvent("acme", l, day.Add(48*time.Hour), 1, false, 0)
	pen.Decisions[0].Penalty = true
	e.Observe(pen)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ns := rc.notices()
	count := map[string]int{}
	for _, n := range ns {
		count[n["period_start"].(string)+" "+jsonNum(n["threshold"])]++
	}
	want := map[string]int{"2026-05-04T00:00:00Z 0.5": 1, "2026-05-04T00:00:00Z 0.8": 1, "2026-05-04T00:00:00Z 1": 1,
		"2026-05-05T00:00:00Z 0.5": 1, "2026-05-05T00:00:00Z 0.8": 1}
	if len(count) != len(want) {
		t.Errorf("notices %v, want %v", count, want)
	}
	for k, v := range want {
		if count[k] != v {
			t.Errorf("notice %s: %d, want %d", k, count[k], v)
		}
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestParseSink: the sink's URL, checked.
func TestParseSink(t *testing.T) {
	for _, s := range []string{"ftp://x/", "file:///etc/passwd", "http://", "http:///path", "/relative",
		"http://host/#frag", "http://[::1", "javascript:alert(1)", "redis://host"} {
		if _, err := ParseSink(s); err == nil {
			t.Errorf("ParseSink(%q) accepted", s)
		} else if strings.Contains(err.Error(), "pass") {
			t.Errorf("error repeats the URL: %v", err)
		}
	}
	u, err := ParseSink("https://user:pw@billing.example:8443/in?token=t")
	if err != nil {
		t.Fatal(err)
	}
	if r := Redact(u); r != "https://billing.example:8443/in" {
		t.Errorf("Redact = %q", r)
	}
	if _, err := ParseSink("http://u:p@[::1/x"); err == nil || strings.Contains(err.Error(), "u:p") {
		t.Errorf("unparsable URL error %v", err)
	}
}

// TestCountedUnits: what a hit exports, by how it was decided.
func TestCountedUnits(t *testing.T) {
	l := limit(t, "api", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Minute})
	for _, tc := range []struct {
		name    string
		mode    ratelimit.HitMode
		d       *ratelimit.Decision
		counted []int64
		want    int64
	}{
		{"allowed", ratelimit.HitCount, &ratelimit.Decision{Allowed: true, Counted: true}, nil, 3},
		{"denied", ratelimit.HitCount, &ratelimit.Decision{}, nil, 0},
		{"shadow its limit denied, request allowed", ratelimit.HitCount, &ratelimit.Decision{Allowed: false, Counted: false}, nil, 0},
		{"shadow allowed", ratelimit.HitCount, &ratelimit.Decision{Allowed: true, Counted: true}, nil, 3},
		{"peek", ratelimit.HitPeek, &ratelimit.Decision{Allowed: true}, nil, 0},
		{"settled by response", ratelimit.HitPeek, &ratelimit.Decision{Allowed: true}, []int64{17}, 17},
		{"settled to zero", ratelimit.HitCount, &ratelimit.Decision{Allowed: true, Counted: true}, []int64{0}, 0},
		{"negative settled", ratelimit.HitCount, &ratelimit.Decision{Allowed: true, Counted: true}, []int64{-4}, 0},
		{"Counted shorter than Hits", ratelimit.HitCount, &ratelimit.Decision{Allowed: true, Counted: true}, []int64{}, 0},
		{"no decision", ratelimit.HitCount, nil, nil, 0},
	} {
		ev := &proxy.Event{Hits: []ratelimit.Hit{{Limit: l, Cost: 3, Mode: tc.mode}}, Counted: tc.counted}
		if got := countedUnits(ev, 0, tc.d); got != tc.want {
			t.Errorf("%s: %d units, want %d", tc.name, got, tc.want)
		}
	}
}

// TestStopWithSinkDown: the final flush gives up at StopTimeout and
// counts what it could not deliver; Close returns.
func TestStopWithSinkDown(t *testing.T) {
	var buf syncBuf
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	e, err := New(Options{Sink: srv.URL, FlushInterval: time.Hour, StopTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l := limit(t, "api", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Minute})
	e.Observe(hitEvent("acme", l, time.Unix(600, 0), 4, true, 0))
	e.Observe(hitEvent("bob", l, time.Unix(600, 0), 3, true, 0))
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.DroppedUnits != 7 || st.DroppedRecords != 2 || st.Pending != 0 {
		t.Errorf("stats %+v, want 7 units in 2 records dropped", st)
	}
	if !strings.Contains(buf.String(), "records not delivered at stop") {
		t.Errorf("log %q", buf.String())
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// claims is a Claimer over a map of owners (the fleet's Redis in the e2e
// tests): down fails every claim; lose > 0 sets the next claims' keys
// but loses their answers (a timeout after Redis wrote).
type claims struct {
	mu   sync.Mutex
	m    map[string]string
	down bool
	lose int
}

func (c *claims) Claim(_ context.Context, key, owner string, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return false, context.DeadlineExceeded
	}
	if ttl <= 0 {
		return false, nil
	}
	if o, ok := c.m[key]; ok {
		return o == owner, nil
	}
	c.m[key] = owner
	if c.lose > 0 {
		c.lose--
		return false, context.DeadlineExceeded
	}
	return true, nil
}

// TestNoticeClaimAnswerLost: the claim store sets the claim but its
// answer is lost; the retry next flush must find the claim this
// exporter's own and post the notice (it found the key taken, and no
// gateway ever posted it).
func TestNoticeClaimAnswerLost(t *testing.T) {
	rc := newReceiver(t)
	cl := &claims{m: map[string]string{}, lose: 1}
	e, err := New(Options{Sink: rc.URL, FlushInterval: 10 * time.Millisecond, Claimer: cl, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetNotify(map[string][]float64{"q": {0.5}})
	l := limit(t, "q", ratelimit.Quota, ratelimit.Rate{Limit: 10, Window: 24 * time.Hour})
	e.Observe(hitEvent("acme", l, time.Now(), 1, true, 4)) // 6 of 10 used: past 0.5
	waitFor(t, "the lost claim retried", func() bool { return e.pendingNotices() == 0 && e.agg.cycle.Load() > 2 })
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.notices()); n != 1 {
		t.Errorf("%d notices posted, want 1: the claim was won, its answer lost", n)
	}
}

// TestNoticeClaims: of two exporters sharing a claimer, one posts each
// notice; a claim store that is down holds the notices until it is back.
func TestNoticeClaims(t *testing.T) {
	rc := newReceiver(t)
	cl := &claims{m: map[string]string{}, down: true}
	var es []*Exporter
	for range 2 {
		e, err := New(Options{Sink: rc.URL, FlushInterval: 10 * time.Millisecond, Claimer: cl, ClaimPrefix: "p:", Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		e.SetNotify(map[string][]float64{"q": {0.5}})
		es = append(es, e)
	}
	l := limit(t, "q", ratelimit.Quota, ratelimit.Rate{Limit: 10, Window: 24 * time.Hour})
	day := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	for _, e := range es {
		e.Observe(hitEvent("acme", l, day, 1, true, 4)) // 6 of 10 used: past 0.5
	}
	waitFor(t, "a cycle with the claims failing", func() bool { return es[0].pendingNotices() == 1 && es[0].agg.cycle.Load() > 2 })
	if n := len(rc.notices()); n != 0 {
		t.Fatalf("%d notices posted without a claim", n)
	}
	cl.mu.Lock()
	cl.down = false
	cl.mu.Unlock()
	for _, e := range es {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rc.notices()); n != 1 {
		t.Errorf("%d notices, want 1", n)
	}
	for k := range cl.m {
		if !strings.HasPrefix(k, "p:usage:notice:notice-") {
			t.Errorf("claim key %q", k)
		}
	}
}

// TestNoticesBounded: with the claim store down for many periods, the
// notices waiting never exceed MaxPending; the rest are counted.
func TestNoticesBounded(t *testing.T) {
	rc := newReceiver(t)
	cl := &claims{m: map[string]string{}, down: true}
	e, err := New(Options{Sink: rc.URL, FlushInterval: time.Hour, MaxPending: 3, Claimer: cl, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetNotify(map[string][]float64{"q": {0.5}})
	l := limit(t, "q", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Minute})
	for i := range 50 { // a new period each time, each past 0.5
		e.Observe(hitEvent("acme", l, time.Unix(int64(60*i), 0), 1, true, 0))
		e.notices.sweep(time.Unix(int64(60*i+60), 0)) // the period ended: forgotten, still waiting
	}
	if n := e.pendingNotices(); n != 3 {
		t.Errorf("%d notices waiting, want MaxPending = 3", n)
	}
	if d := e.Stats().DroppedNotices; d != 47 {
		t.Errorf("dropped %d notices, want 47", d)
	}
	cl.mu.Lock()
	cl.down = false
	cl.mu.Unlock()
	_ = e.Close(context.Background())
}
