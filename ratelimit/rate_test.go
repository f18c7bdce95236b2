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
