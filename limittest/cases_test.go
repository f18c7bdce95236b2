package limittest

import (
	"strings"
	"testing"
)

// TestParseProblems: every problem of a bad cases file is reported with
// its field path, and hostile sizes (a huge count, a huge file) are
// refused before anything runs.
func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"empty", ``, []string{"cases: none defined"}},
		{"no steps", "[[cases]]\nname = \"a\"\n", []string{"cases[0].steps: none defined"}},
		{"unknown field", "[[cases]]\nname = \"a\"\nsteps = []\ncolour = 1\n", []string{"cases.colour: unknown field"}},
		{"not TOML", "[[cases]\n", []string{"1:"}},
		{"duplicate name", `
[[cases]]
name = "a"
steps = [{ at = "0s", request = { path = "/" }, expect = { status = 200 } }]
[[cases]]
name = "a"
steps = [{ at = "0s", request = { path = "/" }, expect = { status = 200 } }]
`, []string{`cases[1].name: "a" already names cases[0]`}},
		{"time runs back", `
[[cases]]
name = "a"
steps = [{ at = "2s", request = { path = "/" }, expect = { status = 200 } },
         { at = "1s", request = { path = "/" }, expect = { status = 200 } }]
`, []string{"cases[0].steps[1].at: 1s is before the previous step's 2s"}},
		{"bad fields", `
[[cases]]
name = "a"
start = "yesterday"
steps = [{ at = "soon", request = { method = "GE T", path = "/", remote_addr = "host", headers = { "X Y" = "1" }, count = 100001 }, expect = { status = "ok", retry_after = -1 } }]
`, []string{
			`cases[0].start: want an RFC 3339 instant`,
			`cases[0].steps[0].at: want a duration ≥ 0 like "0s" or "1.5s", got "soon"`,
			`cases[0].steps[0].request.method: "GE T" is not an HTTP method token`,
			`cases[0].steps[0].request.remote_addr: want an IP or IP:port, got "host"`,
			`cases[0].steps[0].request.headers: "X Y" is not a header name`,
			`cases[0].steps[0].request.count: want 1..100000, got 100001`,
			`cases[0].steps[0].expect.status: want a status or a list of statuses, got ok`,
			`cases[0].steps[0].expect.retry_after: want seconds ≥ 0, got -1`,
		}},
		{"checks nothing", `
[[cases]]
name = "a"
steps = [{ at = "0s", request = { path = "/" } }]
`, []string{"cases[0].steps[0].expect: checks nothing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestParseBounds: a file past MaxFileBytes, or more than MaxRequests in
// all, is refused without running anything.
func TestParseBounds(t *testing.T) {
	if _, err := Parse(make([]byte, MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("huge file: %v", err)
	}
	var b strings.Builder
	for i := 0; i < 11; i++ {
		b.WriteString("[[cases]]\nname = \"c")
		b.WriteByte(byte('a' + i))
		b.WriteString("\"\nsteps = [{ at = \"0s\", request = { path = \"/\", count = 100000 }, expect = { status = 200 } }]\n")
	}
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "cases: 1100000 requests in all, more than 1000000") {
		t.Fatalf("too many requests: %v", err)
	}
}
