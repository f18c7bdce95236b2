package adaptive_test

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/adaptive"
)

// FuzzParsePriority: a priority header's value, which any client may
// send, is a class only when it names one (case and blanks aside), and
// never anything else.
func FuzzParsePriority(f *testing.F) {
	for _, s := range []string{"critical", "CRITICAL", " normal\t", "sheddable", "", "urgent",
		"critical, critical", "crit\x00ical", strings.Repeat("critical", 3)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := adaptive.ParsePriority(s)
		want := strings.ToLower(strings.TrimSpace(s))
		named := (want == "critical" || want == "normal" || want == "sheddable") && len(s) <= 16
		if ok != named {
			t.Fatalf("ParsePriority(%q) ok = %v, want %v", s, ok, named)
		}
		if ok && p.String() != want {
			t.Fatalf("ParsePriority(%q) = %v", s, p)
		}
		if !ok && p != adaptive.Normal {
			t.Fatalf("ParsePriority(%q) = %v without a class, want normal", s, p)
		}
	})
}
