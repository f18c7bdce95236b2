package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCandidateFiles: a posted candidate reads a file only inside the
// live configuration's directory, after `..` and symlinks are resolved,
// or one the live configuration read; every refusal is one of two
// messages that say nothing of the file's existence, type or size.
// FIFOs, devices and directories are refused without blocking.
func TestCandidateFiles(t *testing.T) {
	root := t.TempDir()
	confDir := filepath.Join(root, "conf")
	outside := filepath.Join(root, "elsewhere")
	for _, d := range []string{confDir, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) string {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside := write(filepath.Join(confDir, "secret"), "inside-secret")
	secretOut := write(filepath.Join(outside, "secret"), "a 25 byte secret, outside")
	liveOut := write(filepath.Join(outside, "live-secret"), "named by the live config")
	if err := os.Symlink(secretOut, filepath.Join(confDir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(inside, filepath.Join(confDir, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(confDir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(confDir, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{liveOut: true}
	guard := newFileGuard(filepath.Join(confDir, "gateway.toml"), live)
	for _, tc := range []struct {
		name, path string
		want       string // the file's content, or the error
	}{
		{"inside", inside, "inside-secret"},
		{"symlink inside", filepath.Join(confDir, "alias"), "inside-secret"},
		{"named by the live configuration", liveOut, "named by the live config"},
		{"outside", secretOut, errOutsideDir.Error()},
		{"outside, missing", filepath.Join(outside, "nothing"), errOutsideDir.Error()},
		{"shadow", "/etc/shadow", errOutsideDir.Error()},
		{"dot-dot", filepath.Join(confDir, "..", "elsewhere", "secret"), errOutsideDir.Error()},
		{"dot-dot to the root", filepath.Join(confDir, "../../../../../../etc/passwd"), errOutsideDir.Error()},
		{"symlink escape", filepath.Join(confDir, "escape"), errOutsideDir.Error()},
		{"proc environ", "/proc/self/environ", errOutsideDir.Error()},
		{"dev zero", "/dev/zero", errOutsideDir.Error()},
		{"fifo inside", filepath.Join(confDir, "fifo"), errUnreadable.Error()},
		{"directory inside", filepath.Join(confDir, "dir"), errUnreadable.Error()},
		{"the directory itself", confDir, errOutsideDir.Error()},
		{"missing inside", filepath.Join(confDir, "nothing"), errUnreadable.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fileReader{guard: guard}
			b, err := r.ReadFile(tc.path)
			got := string(b)
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("ReadFile(%q) = %q, want %q", tc.path, got, tc.want)
			}
			if err != nil && (strings.Contains(got, tc.path) || strings.Contains(got, "25")) {
				t.Fatalf("the refusal %q names the file or its size", got)
			}
		})
	}
}

// TestReadRegularBounds: the live configuration's files too are read only
// when regular and at most maxNamedFile bytes: a FIFO does not hang the
// open, /dev/zero is not read forever.
func TestReadRegularBounds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxNamedFile + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{dir, "not a regular file"},
		{big, "larger than 64 MiB"},
	} {
		var r fileReader
		if _, err := r.ReadFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadFile(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	// A symlinked secret (a mounted Kubernetes Secret) is read.
	var r fileReader
	if b, err := r.ReadFile(link); err != nil || string(b) != "ok" {
		t.Errorf("ReadFile(symlink) = %q, %v", b, err)
	}
	if !r.files()[link] || !r.files()[filepath.Join(dir, "target")] {
		t.Errorf("files read %v, want the link and its target", r.files())
	}
	if _, err := os.Stat(fifo); errors.Is(err, os.ErrNotExist) {
		t.Fatal("fifo gone")
	}
}
