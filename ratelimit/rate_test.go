package ratelimit

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Rate
		wantErr string
	}{
		{"10/second", Rate{10, time.Second}, ""},
		{"10/s", Rate{10, time.Second}, ""},
		{"10/sec", Rate{10, time.Second}, ""},
		{"600/minute", Rate{600, time.Minute}, ""},
		{"600/m", Rate{600, time.Minute}, ""},
		{"5/hour", Rate{5, time.Hour}, ""},
		{"5/h", Rate{5, time.Hour}, ""},
		{"1/day", Rate{1, 24 * time.Hour}, ""},
		{"1/d", Rate{1, 24 * time.Hour}, ""},
		{"5/10s", Rate{5, 10 * time.Second}, ""},
		{"1000/1h30m", Rate{1000, 90 * time.Minute}, ""},
		{"3/2d", Rate{3, 48 * time.Hour}, ""},
		{"3/1d12h", Rate{3, 36 * time.Hour}, ""},
		{"7/250ms", Rate{7, 250 * time.Millisecond}, ""},
		{" 10 / second ", Rate{10, time.Second}, ""},
		{"9007199254740992/s", Rate{MaxLimit, time.Second}, ""},
		{"10/fortnight", Rate{}, "unknown window"},
		{"10", Rate{}, "want N/window"},
		{"", Rate{}, "want N/window"},
		{"ten/second", Rate{}, "not an integer"},
		{"1.5/second", Rate{}, "not an integer"},
		{"0/second", Rate{}, "must be positive"},
		{"-1/second", Rate{}, "must be positive"},
		{"9007199254740993/s", Rate{}, "exceeds 2^53"},
		{"99999999999999999999/s", Rate{}, "not an integer"},
		{"10/0s", Rate{}, "must be positive"},
		{"10/-5s", Rate{}, "unknown window"},
		{"10/", Rate{}, "missing window"},
		{"10/367d", Rate{}, "exceeds"},
		{"10/1ns", Rate{}, "microseconds"},
		{"10/s/s", Rate{}, "unknown window"},
	} {
		got, err := ParseRate(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRate(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		back, err := ParseRate(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRate(%q).String() = %q does not parse back: %v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestRateSeconds(t *testing.T) {
	for _, tc := range []struct {
		w    time.Duration
		want int64
	}{{time.Second, 1}, {250 * time.Millisecond, 1}, {1500 * time.Millisecond, 2}, {time.Hour, 3600}} {
		if got := (Rate{Limit: 1, Window: tc.w}).Seconds(); got != tc.want {
			t.Errorf("Seconds(%s) = %d, want %d", tc.w, got, tc.want)
		}
	}
}

// TestLogLimitBoundedByMemory: a sliding_window_log key holds up to one
// 16-byte entry per unit of its limit, so Validate refuses limits whose key
// could take more than MaxStateBytes, naming the bytes. 10^13/day (which
// once let single requests add 45 MB each) is refused; 4,000,000/s is not.
func TestLogLimitBoundedByMemory(t *testing.T) {
	for _, tc := range []struct {
		rates []Rate
		want  string // "" for accepted
	}{
		{[]Rate{{4_000_000, time.Second}}, ""},
		{[]Rate{{(MaxStateBytes - 48) / 16, time.Hour}}, ""},
		{[]Rate{{(MaxStateBytes-48)/16 + 1, time.Hour}}, "can take 67108880 bytes per key, more than the 67108864 allowed"},
		{[]Rate{{10_000_000_000_000, 24 * time.Hour}}, "limits 10000000000000/24h0m0s can take 160000000000048 bytes per key"},
		{[]Rate{{MaxLimit, time.Second}}, "bytes per key"},
		// The windows of one key add up.
		{[]Rate{{3_000_000, time.Second}, {3_000_000, time.Hour}}, "can take 96000096 bytes per key"},
	} {
		l := &Limit{Name: "log", Algorithm: SlidingWindowLog, Rates: tc.rates}
		err := l.Finish()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.rates, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want it to contain %q", tc.rates, err, tc.want)
		}
	}
	// Other algorithms keep a few bytes whatever their limit.
	for _, a := range []Algorithm{FixedWindow, FixedWindowElastic, SlidingWindowCounter, TokenBucket, GCRA} {
		l := &Limit{Name: "x", Algorithm: a, Rates: []Rate{{MaxLimit, time.Second}}}
		if err := l.Finish(); err != nil {
			t.Errorf("%s with limit 2^53: %v", a, err)
		}
		if b := l.StateBytes(); b > 64 {
			t.Errorf("%s: StateBytes %d", a, b)
		}
	}
}

// FuzzParseRate checks that any rate text either parses into a valid rate
// that round-trips through String, or is an error — never a panic.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{
		"10/second", "600/minute", "1/hour", "5/day", // long units
		"10/s", "1/m", "3/h", "7/d", // short units
		"5/10s", "1000/1h30m", "2/1d12h", "3/1500ms", // durations
		"10/fortnight", "0/s", "-1/s", "9007199254740993/s", "5/0s", "5/-1s", // invalid
		"", "/", "1/", "/s", " 10 / second ", "1/367d", "1/1d-1s", "1e3/s", "1/1.5.5s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			if !strings.Contains(err.Error(), "rate ") {
				t.Errorf("ParseRate(%q) error %q does not name the rate", s, err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseRate(%q) = %v, which does not validate: %v", s, r, err)
		}
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %v; ParseRate(%q) = %v, %v", s, r, r.String(), back, err)
		}
	})
}

// FuzzParseDuration checks that any text either parses into a
// non-negative duration whose Go spelling parses back to it, or is an
// error — never a panic or a wrapped-around value.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"50ms", "5s", "1m", "1h30m", "1d", "2d12h", "366d", "0s", "0", // valid
		"", "d", "-1s", "+1s", "1d-1s", "367d", "1x", "1.5d", "9223372036854775807ns", "1d2562047h", // invalid or edge
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v; ParseDuration(%q) = %v, %v", s, d, d.String(), back, err)
		}
	})
}
