package e2e

import (
	"strings"
	"testing"
)

// TestHelp (issue: `gateway --help` printed "Usage of serve" and no list of
// commands): --help, -h and help list every command with one line each and
// exit 0; each command's -help, and help <command>, print its synopsis and
// flags and exit 0; an unknown command exits 2 with the list on stderr.
func TestHelp(t *testing.T) {
	t.Parallel()
	commands := []string{"serve", "validate", "replay", "version"}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := runGateway(t, nil, args...)
		if code != 0 || strings.Contains(stdout+stderr, "Usage of serve") {
			t.Errorf("gateway %s: exit %d, stdout %q, stderr %q; want 0 and the list of commands", args[0], code, stdout, stderr)
		}
		for _, c := range commands {
			if !strings.Contains(stdout, "\t"+c+" ") {
				t.Errorf("gateway %s: command %s is not listed:\n%s", args[0], c, stdout)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want []string // in the output
	}{
		{[]string{"serve", "-help"}, []string{"usage: gateway [serve] [flags]", "-config", "-allow-empty", "-log-level"}},
		{[]string{"validate", "--help"}, []string{"usage: gateway validate [flags]", "-config", "-allow-empty"}},
		{[]string{"replay", "-h"}, []string{"usage: gateway replay --log FILE [flags]", "-log ", "-format", "-reorder-window"}},
		{[]string{"version", "-help"}, []string{"usage: gateway version"}},
		{[]string{"help", "validate"}, []string{"usage: gateway validate [flags]", "-allow-empty"}},
	} {
		code, stdout, stderr := runGateway(t, nil, tc.args...)
		out := stdout + stderr
		if code != 0 || strings.Contains(out, "Usage of") {
			t.Errorf("gateway %s: exit %d, output %q; want 0 and the command's usage", strings.Join(tc.args, " "), code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("gateway %s: output does not contain %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
	code, _, stderr := runGateway(t, nil, "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) || !strings.Contains(stderr, "\tvalidate ") {
		t.Errorf("gateway frobnicate: exit %d, stderr %q; want 2 with the list of commands", code, stderr)
	}
}
