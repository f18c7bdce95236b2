package policy

import (
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestEnforcesMonotone: raising enforce_percent only adds keys, 0 and 100
// are none and all, and the share is near the percentage.
func TestEnforcesMonotone(t *testing.T) {
	const n = 10000
	prev := map[int]bool{}
	for _, pct := range []int{0, 1, 10, 50, 90, 100} {
		l := &Limit{EnforcePercent: pct}
		in := 0
		for i := 0; i < n; i++ {
			e := l.Enforces("key-" + strconv.Itoa(i))
			if prev[i] && !e {
				t.Fatalf("key %d enforced below %d%% but not at it", i, pct)
			}
			prev[i] = e
			if e {
				in++
			}
		}
		// An oracle of counts: the share is within 2 points of pct.
		if got := in * 100 / n; got < pct-2 || got > pct+2 {
			t.Errorf("%d%%: %d of %d keys enforced", pct, in, n)
		}
	}
}

// TestJitterFor: the jitter stays in 0..Jitter, is the same for a key
// within a window and differs between keys.
func TestJitterFor(t *testing.T) {
	l := &Limit{Jitter: 5 * time.Second}
	t0 := time.Unix(1_700_000_000, 0)
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		k := "k" + strconv.Itoa(i)
		j := l.JitterFor(k, t0, time.Hour)
		if j < 0 || j > 5*time.Second {
			t.Fatalf("%s: jitter %s outside 0..5s", k, j)
		}
		if again := l.JitterFor(k, t0.Add(30*time.Minute), time.Hour); again != j {
			t.Fatalf("%s: %s then %s within one window", k, j, again)
		}
		seen[j.Round(100*time.Millisecond)] = true
	}
	if len(seen) < 20 {
		t.Errorf("200 keys got %d distinct jitters (to 0.1 s), want them spread", len(seen))
	}
	if (&Limit{}).JitterFor("k", t0, time.Hour) != 0 {
		t.Error("no jitter configured, want 0")
	}
}

// TestShadowOf: the twin shares the ID (the same counters), is shadow,
// and is one value per definition.
func TestShadowOf(t *testing.T) {
	rl := &ratelimit.Limit{Name: "a", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 1, Window: time.Second}},
		Batch: &ratelimit.Batch{Interval: 100 * time.Millisecond, Lease: 1}}
	if err := rl.Finish(); err != nil {
		t.Fatal(err)
	}
	l := &Limit{Limit: rl, EnforcePercent: 10}
	tw := l.ShadowOf(rl)
	if !tw.Shadow || tw.ID != rl.ID || rl.Shadow {
		t.Fatalf("twin %+v of %+v: want shadow, same ID, original untouched", tw, rl)
	}
	if tw.Batch != nil {
		t.Error("a twin keeps Batch: batching is for enforced limits")
	}
	if l.ShadowOf(rl) != tw {
		t.Error("a second twin of one definition")
	}
}

// TestAnswerBody: the template's placeholders, and braces that are none.
func TestAnswerBody(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"", ""},
		{"slow down", "slow down"},
		{"{limit}: retry in {retry_after}s", "api: retry in 7s"},
		{`{"error":"{limit}","retry":{retry_after}}`, `{"error":"api","retry":7}`},
		{"{limit", "{limit"},
		{"{{limit}}", "{api}"},
		{"{retry_after}{retry_after}", "77"},
	} {
		a := &Answer{body: parseAnswerBody(tc.tmpl)}
		if got := string(a.AppendBody(nil, "api", 7)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.tmpl, got, tc.want)
		}
	}
}
