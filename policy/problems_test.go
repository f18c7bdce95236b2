package policy

import (
	"strings"
	"testing"
)

// wantProblems fails t unless err reports exactly the problems in want, one
// a line in any order. Each want is a prefix of its line, so that a problem
// quoting a parser's error need not spell that error out.
func wantProblems(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no problem reported, want %q", want)
	}
	lines := strings.Split(err.Error(), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("missing problem %q in:\n%v", w, err)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(lines), len(want), err)
	}
}
