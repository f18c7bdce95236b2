package headers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

func limit(t testing.TB, name string, alg ratelimit.Algorithm, rates ...string) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: name, Algorithm: alg}
	for _, s := range rates {
		r, err := ratelimit.ParseRate(s)
		if err != nil {
			t.Fatal(err)
		}
		l.Rates = append(l.Rates, r)
	}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseStyle(t *testing.T) {
	for _, s := range []Style{IETF, Legacy, X} {
		got, err := ParseStyle(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStyle(%q) = %v, %v", s.String(), got, err)
		}
	}
	for _, bad := range []string{"", "IETF", "draft", "x-ratelimit"} {
		if _, err := ParseStyle(bad); err == nil {
			t.Errorf("ParseStyle(%q) succeeded", bad)
		}
	}
}

func TestItemName(t *testing.T) {
	one := limit(t, "per-client", ratelimit.FixedWindow, "600/minute")
	multi := limit(t, "per-client", ratelimit.FixedWindow, "10/second", "600/minute", "5/90s", "100/1h", "1000/day", "3/1500ms")
	tests := []struct {
		l      *ratelimit.Limit
		window int
		want   string
	}{
		// Finish sorts the rates, shortest window first, whatever order
		// they were listed in.
		{one, 0, "per-client"},
		{multi, 0, "per-client.1s"},
		{multi, 1, "per-client.1500ms"},
		{multi, 2, "per-client.1m"},
		{multi, 3, "per-client.90s"},
		{multi, 4, "per-client.1h"},
		{multi, 5, "per-client.1d"},
		{multi, 9, "per-client"},
	}
	for _, tt := range tests {
		if got := ItemName(tt.l, tt.window); got != tt.want {
			t.Errorf("ItemName(%d rates, %d) = %q, want %q", len(tt.l.Rates), tt.window, got, tt.want)
		}
	}
}

func TestPolicyValue(t *testing.T) {
	pc := limit(t, "per-client", ratelimit.SlidingWindowCounter, "10/second", "600/minute")
	search := limit(t, "search", ratelimit.SlidingWindowLog, "100/minute")
	shadow := limit(t, "tighter", ratelimit.FixedWindow, "5/minute")
	shadow.Shadow = true
	conc := &ratelimit.Limit{Name: "inflight", Algorithm: ratelimit.Concurrency, MaxInFlight: 8}
	odd := limit(t, `we"ird\`, ratelimit.FixedWindow, "7/1500ms")
	got := PolicyValue([]*ratelimit.Limit{pc, shadow, search, conc, odd})
	want := `"per-client.1s";q=10;w=1, "per-client.1m";q=600;w=60, "search";q=100;w=60, "inflight";q=8, "we\"ird\\";q=7;w=2`
	if got != want {
		t.Errorf("PolicyValue =\n %s\nwant\n %s", got, want)
	}
	if again := PolicyValue([]*ratelimit.Limit{pc, shadow, search, conc, odd}); again != got {
		t.Errorf("PolicyValue not stable: %q then %q", got, again)
	}
	if got := PolicyValue(nil); got != "" {
		t.Errorf("PolicyValue(nil) = %q", got)
	}
}

var t0 = time.Unix(1700000000, 250_000_000)

func TestSet(t *testing.T) {
	pc := limit(t, "per-client", ratelimit.SlidingWindowCounter, "10/second", "600/minute")
	search := limit(t, "search", ratelimit.SlidingWindowLog, "100/minute")
	shadow := limit(t, "tighter", ratelimit.FixedWindow, "5/minute")
	shadow.Shadow = true
	hits := []ratelimit.Hit{{Limit: pc, Cost: 1}, {Limit: search, Cost: 1}, {Limit: shadow, Cost: 1}}
	policy := PolicyValue([]*ratelimit.Limit{pc, search, shadow})

	tests := []struct {
		name   string
		styles Styles
		ds     []ratelimit.Decision
		want   http.Header
	}{{
		name:   "allowed picks lowest remaining fraction (search 42/100 < per-client 9/10)",
		styles: Styles{IETF, Legacy, X},
		ds: []ratelimit.Decision{
			{Allowed: true, Counted: true, Window: 0, Limit: 10, Remaining: 9, Reset: 100 * time.Millisecond},
			{Allowed: true, Counted: true, Limit: 100, Remaining: 42, Reset: 16200 * time.Millisecond},
			{Allowed: true, Counted: true, Limit: 5, Remaining: 0, Reset: time.Second}, // shadow: ignored
		},
		want: http.Header{
			"Ratelimit-Policy":      {policy},
			"Ratelimit":             {`"search";r=42;t=17`},
			"Ratelimit-Limit":       {"100"},
			"Ratelimit-Remaining":   {"42"},
			"Ratelimit-Reset":       {"17"},
			"X-Ratelimit-Limit":     {"100"},
			"X-Ratelimit-Remaining": {"42"},
			"X-Ratelimit-Reset":     {"1700000017"},
		},
	}, {
		name:   "multi-window item name of the reported window",
		styles: Styles{IETF},
		ds: []ratelimit.Decision{
			{Allowed: true, Counted: true, Window: 1, Limit: 600, Remaining: 3, Reset: 59 * time.Second},
			{Allowed: true, Counted: true, Limit: 100, Remaining: 50, Reset: time.Second},
			{Allowed: true},
		},
		want: http.Header{
			"Ratelimit-Policy": {policy},
			"Ratelimit":        {`"per-client.1m";r=3;t=59`},
		},
	}, {
		name:   "denied: longest RetryAfter wins, r=0, t covers RetryAfter",
		styles: Styles{IETF, Legacy},
		ds: []ratelimit.Decision{
			{Allowed: false, Window: 0, Limit: 10, Remaining: 0, Reset: 300 * time.Millisecond, RetryAfter: 300 * time.Millisecond},
			{Allowed: false, Limit: 100, Remaining: 0, Reset: 2 * time.Second, RetryAfter: 6100 * time.Millisecond},
			{Allowed: false, Limit: 5, RetryAfter: time.Hour},
		},
		want: http.Header{
			"Ratelimit-Policy":    {policy},
			"Ratelimit":           {`"search";r=0;t=7`},
			"Ratelimit-Limit":     {"100"},
			"Ratelimit-Remaining": {"0"},
			"Ratelimit-Reset":     {"7"},
		},
	}, {
		name:   "a denial beats a lower fraction that allowed",
		styles: Styles{Legacy},
		ds: []ratelimit.Decision{
			{Allowed: true, Limit: 10, Remaining: 0, Reset: time.Second},
			{Allowed: false, Limit: 100, Remaining: 0, Reset: 1500 * time.Millisecond, RetryAfter: time.Second},
			{Allowed: true},
		},
		want: http.Header{
			"Ratelimit-Limit":     {"100"},
			"Ratelimit-Remaining": {"0"},
			"Ratelimit-Reset":     {"2"},
		},
	}, {
		// A cost above the capacity on an unused window: the true
		// remaining, and no reset (nothing is used, nothing comes back),
		// not r=0;t=0.
		name:   "cost above capacity on an unused window: true remaining, no reset",
		styles: Styles{IETF, Legacy, X},
		ds: []ratelimit.Decision{
			{Allowed: true, Limit: 10, Remaining: 9, Reset: time.Second},
			{Allowed: false, Never: true, Limit: 100, Remaining: 100},
		},
		want: http.Header{
			"Ratelimit-Policy":      {policy},
			"Ratelimit":             {`"search";r=100`},
			"Ratelimit-Limit":       {"100"},
			"Ratelimit-Remaining":   {"100"},
			"X-Ratelimit-Limit":     {"100"},
			"X-Ratelimit-Remaining": {"100"},
		},
	}, {
		name:   "cost above capacity on a used window: true remaining, reset when more comes back",
		styles: Styles{IETF, Legacy, X},
		ds: []ratelimit.Decision{
			{Allowed: false, Never: true, Limit: 10, Remaining: 4, Reset: 2500 * time.Millisecond},
		},
		want: http.Header{
			"Ratelimit-Policy":      {policy},
			"Ratelimit":             {`"per-client.1s";r=4;t=3`},
			"Ratelimit-Limit":       {"10"},
			"Ratelimit-Remaining":   {"4"},
			"Ratelimit-Reset":       {"3"},
			"X-Ratelimit-Limit":     {"10"},
			"X-Ratelimit-Remaining": {"4"},
			"X-Ratelimit-Reset":     {"1700000003"},
		},
	}, {
		name:   "no styles, no headers",
		styles: nil,
		ds:     []ratelimit.Decision{{Allowed: true, Limit: 10, Remaining: 1}, {Allowed: true, Limit: 1, Remaining: 1}, {}},
		want:   http.Header{},
	}, {
		name:   "x style: reset is unix time rounded up; zero reset is now rounded up",
		styles: Styles{X},
		ds: []ratelimit.Decision{
			{Allowed: true, Limit: 10, Remaining: 10},
			{Allowed: true, Limit: 100, Remaining: 100},
			{Allowed: true},
		},
		want: http.Header{
			"X-Ratelimit-Limit":     {"10"},
			"X-Ratelimit-Remaining": {"10"},
			"X-Ratelimit-Reset":     {"1700000001"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			new(Writer).Set(h, tt.styles, policy, hits, tt.ds, t0)
			if !reflect.DeepEqual(h, tt.want) {
				t.Errorf("Set wrote\n %v\nwant\n %v", h, tt.want)
			}
		})
	}
}

func TestSetOnlyShadow(t *testing.T) {
	shadow := limit(t, "tighter", ratelimit.FixedWindow, "5/minute")
	shadow.Shadow = true
	h := http.Header{}
	new(Writer).Set(h, Styles{IETF, Legacy, X}, "", []ratelimit.Hit{{Limit: shadow, Cost: 1}}, []ratelimit.Decision{{Allowed: false, Limit: 5}}, t0)
	if len(h) != 0 {
		t.Errorf("shadow-only decisions wrote headers: %v", h)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 1}, {0, 1}, {1, 1}, {time.Millisecond, 1}, {time.Second, 1},
		{time.Second + 1, 2}, {6100 * time.Millisecond, 7}, {time.Hour, 3600},
		// The longest Duration is 9,223,372,036.854775807 s; rounding up
		// would overflow Duration arithmetic, so it saturates at the
		// whole seconds below it.
		{time.Duration(1<<63 - 1), 9_223_372_036},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestTooManyRequests(t *testing.T) {
	pc := limit(t, "per-client", ratelimit.SlidingWindowCounter, "10/second", "600/minute")
	search := limit(t, "search", ratelimit.SlidingWindowLog, "100/minute")
	shadow := limit(t, "tighter", ratelimit.FixedWindow, "5/minute")
	shadow.Shadow = true
	conc := &ratelimit.Limit{Name: "inflight", Algorithm: ratelimit.Concurrency, MaxInFlight: 2}

	tests := []struct {
		name string
		hits []ratelimit.Hit
		ds   []ratelimit.Decision
		want Problem
	}{{
		name: "longest wait names the limit; every denier is listed",
		hits: []ratelimit.Hit{{Limit: pc, Cost: 1}, {Limit: search, Cost: 1}, {Limit: shadow, Cost: 1}},
		ds:   []ratelimit.Decision{{RetryAfter: 400 * time.Millisecond}, {RetryAfter: 6500 * time.Millisecond}, {RetryAfter: time.Hour}},
		want: Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: 429,
			Detail: `rate limit "search" exceeded; retry in 7s`, ViolatedPolicies: []string{"per-client", "search"}, RetryAfter: 7},
	}, {
		name: "cost beyond capacity: Never, no retry_after",
		hits: []ratelimit.Hit{{Limit: pc, Cost: 1}, {Limit: search, Cost: 500}},
		ds:   []ratelimit.Decision{{Allowed: true, Limit: 10, Remaining: 9}, {Never: true, Limit: 100}},
		want: Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: 429,
			Detail: `cost 500 exceeds capacity 100 of limit "search"`, ViolatedPolicies: []string{"search"}},
	}, {
		name: "Never beats a longer wait",
		hits: []ratelimit.Hit{{Limit: pc, Cost: 20}, {Limit: search, Cost: 20}},
		ds:   []ratelimit.Decision{{Never: true, Limit: 10}, {RetryAfter: time.Minute}},
		want: Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: 429,
			Detail: `cost 20 exceeds capacity 10 of limit "per-client"`, ViolatedPolicies: []string{"per-client", "search"}},
	}, {
		name: "concurrency: unknown wait is 1s",
		hits: []ratelimit.Hit{{Limit: conc, Cost: 1}},
		ds:   []ratelimit.Decision{{Limit: 2}},
		want: Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: 429,
			Detail: `concurrency limit "inflight" exceeded; retry in 1s`, ViolatedPolicies: []string{"inflight"}, RetryAfter: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TooManyRequests(tt.hits, tt.ds); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TooManyRequests =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestWriteProblem(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "7")
	WriteProblem(rec, Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: 429,
		Detail: `rate limit "search" exceeded; retry in 7s`, ViolatedPolicies: []string{"search"}, RetryAfter: 7})
	if rec.Code != 429 {
		t.Errorf("status %d, want 429", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "7" {
		t.Errorf("Retry-After lost: %q", ra)
	}
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"rate limit \"search\" exceeded; retry in 7s","violated-policies":["search"],"retry_after":7}` + "\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n %s\nwant\n %s", got, want)
	}

	rec = httptest.NewRecorder()
	WriteProblem(rec, Problem{Status: 404})
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != "about:blank" || m["title"] != "Not Found" || m["status"] != 404.0 || len(m) != 3 {
		t.Errorf("defaults: %v", m)
	}
	if strings.Contains(rec.Body.String(), "retry_after") {
		t.Errorf("zero retry_after written: %s", rec.Body.String())
	}
}

func BenchmarkSet(b *testing.B) {
	pc := limit(b, "per-client", ratelimit.SlidingWindowCounter, "10/second", "600/minute")
	search := limit(b, "search", ratelimit.SlidingWindowLog, "100/minute")
	hits := []ratelimit.Hit{{Limit: pc, Cost: 1}, {Limit: search, Cost: 1}}
	ds := []ratelimit.Decision{
		{Allowed: true, Counted: true, Window: 1, Limit: 600, Remaining: 3, Reset: 59 * time.Second},
		{Allowed: true, Counted: true, Limit: 100, Remaining: 50, Reset: time.Second},
	}
	policy := PolicyValue([]*ratelimit.Limit{pc, search})
	// A client denied again and again (the hot key of an attack).
	denied := []ratelimit.Decision{ds[0], {Counted: true, Limit: 100, RetryAfter: 1500 * time.Millisecond}}
	for _, bc := range []struct {
		name   string
		styles Styles
		ds     []ratelimit.Decision
	}{{"ietf", Styles{IETF}, ds}, {"all", Styles{IETF, Legacy, X}, ds}, {"ietf-denied", Styles{IETF}, denied}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var wr Writer
			b.RunParallel(func(pb *testing.PB) {
				h := make(http.Header, 8)
				for pb.Next() {
					wr.Set(h, bc.styles, policy, hits, bc.ds, t0)
				}
			})
		})
	}
}

// TestIntValue checks every shared value and a few beyond the table against
// fmt's spelling, and that appending to a shared value leaves it alone.
func TestIntValue(t *testing.T) {
	for n := int64(-3); n < 5000; n++ {
		v := IntValue(n)
		if len(v) != 1 || v[0] != fmt.Sprint(n) {
			t.Fatalf("IntValue(%d) = %q", n, v)
		}
		_ = append(v, "x")
		if v := IntValue(n); len(v) != 1 || v[0] != fmt.Sprint(n) {
			t.Fatalf("IntValue(%d) = %q after an append to it", n, v)
		}
	}
	if v := IntValue(1 << 40); len(v) != 1 || v[0] != "1099511627776" {
		t.Errorf("IntValue(1<<40) = %q", v)
	}
	// A Writer keeps the last value beyond the table: asked in turn for
	// values beyond it, each answer is its own spelling, and an append to
	// a kept value does not reach the next answer.
	var wr Writer
	for _, n := range []int64{1 << 40, 1 << 40, 7200, 7200, 7201, 1 << 40, -7, 4095, 4096} {
		v := wr.IntValue(n)
		if len(v) != 1 || cap(v) != 1 || v[0] != fmt.Sprint(n) {
			t.Fatalf("Writer.IntValue(%d) = %q (cap %d)", n, v, cap(v))
		}
		_ = append(v, "x")
	}
}

// BenchmarkGCWithTables is one garbage collection of a process holding
// this package's shared values: the collector marks every live object on
// each cycle, and a gateway runs a cycle every few hundred requests, so
// what the tables cost here every request pays a share of.
//
//	go test -run '^$' -bench GCWithTables -count 10 ./headers
func BenchmarkGCWithTables(b *testing.B) {
	_ = IntValue(1)
	for b.Loop() {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapObjects), "live-objects")
}
