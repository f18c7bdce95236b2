package main

import (
	"bytes"
	"os"
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

// TestServeInvalidCandidate: an invalid --candidate file stops the start
// with exit 2 and its problems, before anything listens.
func TestServeInvalidCandidate(t *testing.T) {
	bad := t.TempDir() + "/next.toml"
	if err := os.WriteFile(bad, []byte("[[limits]]\nname = \"x\"\nrates = [\"1/fortnight\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--config", "../../gateway.toml", "--candidate", bad}, nil, &out, &errb)
	if code != exitInvalid || !strings.Contains(errb.String(), "limits[0].rates[0]") {
		t.Fatalf("exit %d, want %d naming limits[0].rates[0]\n%s", code, exitInvalid, errb.String())
	}
}
