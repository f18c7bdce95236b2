package regularfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRead: what a configuration may name and what it may not. Each
// refusal returns at once (a FIFO without a writer would block a plain
// open until one came).
func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(file, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		max        int64
		want       string // "" for the file's content
	}{
		{"regular file", file, 10, ""},
		{"symlink to a regular file", link, 10, ""},
		{"one byte over the bound", file, 9, "larger than 9 bytes"},
		{"FIFO without a writer", fifo, 1 << 20, "not a regular file"},
		{"directory", dir, 1 << 20, "not a regular file"},
		{"device that never ends", "/dev/zero", 1 << 20, "not a regular file"},
		{"missing", filepath.Join(dir, "none"), 10, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Read(tc.path, tc.max)
			if tc.want == "" {
				if err != nil || string(b) != "0123456789" {
					t.Fatalf("Read = %q, %v; want the file", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %q, %v; want an error saying %q", b, err, tc.want)
			}
		})
	}
}
