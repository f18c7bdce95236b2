package policy

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
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

// problemCase is one row of a Validate table: a change to a valid
// configuration and the problems it must report (none: it stays valid).
type problemCase struct {
	name   string
	mutate func(c *config.Config)
	want   []string
}

// testProblems runs each case as a subtest on a fresh configuration from
// start: Validate must accept it when want is empty and otherwise report
// exactly want.
func testProblems(t *testing.T, start func() config.Config, cases []problemCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c := start()
			tt.mutate(&c)
			err := validate(&c)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantProblems(t, err, tt.want)
		})
	}
}
