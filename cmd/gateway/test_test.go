package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestShippedCasesPass keeps the shipped cases file true to the shipped
// gateway.toml: `gateway test` passes it with exit 0.
func TestShippedCasesPass(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"test", "--config", "../../gateway.toml", "../../gateway.cases.toml"}, nil, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "PASS") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}

// TestTestCommandArgs: no cases file, or a missing one, is bad input
// (exit 2), not a failed test.
func TestTestCommandArgs(t *testing.T) {
	for _, args := range [][]string{
		{"test", "--config", "../../gateway.toml"},
		{"test", "--config", "../../gateway.toml", "no-such-cases.toml"},
		{"test", "--config", "no-such-gateway.toml", "../../gateway.cases.toml"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != exitInvalid {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitInvalid, errb.String())
		}
	}
}
