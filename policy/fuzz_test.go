package policy

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/ratelimit"
)

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
		r, err := ratelimit.ParseRate(s)
		if err != nil {
			if !strings.Contains(err.Error(), "rate ") {
				t.Errorf("ParseRate(%q) error %q does not name the rate", s, err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseRate(%q) = %v, which does not validate: %v", s, r, err)
		}
		back, err := ratelimit.ParseRate(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %v; ParseRate(%q) = %v, %v", s, r, r.String(), back, err)
		}
	})
}

// FuzzCleanPath checks CleanPath's properties on any input: the result is
// rooted, has no empty, "." or ".." segment, is a fixed point, and keeps
// the input's percent-escapes untouched.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"", "/", "/a/b", "//a//b/", "/./a/../b", "a/b", "/..", "/a?x=/../", "/%2e%2e/x", "/a/.../b", "/.a/..b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := CleanPath(s)
		if c == "" || c[0] != '/' {
			t.Fatalf("CleanPath(%q) = %q, not rooted", s, c)
		}
		if !isClean(c) {
			t.Fatalf("CleanPath(%q) = %q, not clean", s, c)
		}
		if again := CleanPath(c); again != c && !strings.Contains(c, "?") {
			t.Fatalf("CleanPath not idempotent: %q -> %q -> %q", s, c, again)
		}
		if strings.Count(c, "%") > strings.Count(s, "%") {
			t.Fatalf("CleanPath(%q) = %q invented escapes", s, c)
		}
	})
}
