package headers

import (
	"encoding/json"
	"testing"
)

// FuzzAppendProblem checks that the reflection-free encoder writes exactly
// what encoding/json writes, for any strings.
func FuzzAppendProblem(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote\\`, "<script>&", "ctl\x00\x1f\n\r\t\b\f", "bad \xff utf8", "sep\u2028\u2029", "ünï😀"} {
		f.Add(s, s, int64(7))
	}
	f.Fuzz(func(t *testing.T, detail, name string, retry int64) {
		p := Problem{Type: QuotaExceeded, Title: name, Status: 429, Detail: detail, RetryAfter: retry}
		if name != "" {
			p.ViolatedPolicies = []string{name, detail}
		}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendProblem(nil, &p); string(got) != string(want) {
			t.Fatalf("appendProblem = %s\nencoding/json = %s", got, want)
		}
	})
}
