package main

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tollgate/gateway/internal/regularfile"
)

// maxNamedFile bounds a file a configuration names (a secret, a key, a
// certificate, the consumer registry): /dev/zero or a huge file named by
// mistake must not take the gateway's memory.
const maxNamedFile = 64 << 20

// Errors of a file a posted candidate names. They name no file and say
// nothing of whether it exists or of its size: the admin API's caller
// may not read the gateway's file system.
var (
	errOutsideDir = errors.New("outside the configuration's directory (a candidate may name files there, or those the live configuration names)")
	errUnreadable = errors.New("cannot be read (a candidate may name regular files of at most 64 MiB)")
)

// fileReader reads the files a configuration names: regular files only,
// opened without blocking (a FIFO would hang the open) and without
// following a final symlink, read up to maxNamedFile. It records the
// paths it read, as written and resolved. With guard set it reads for a
// candidate posted to the admin API: only files in the guard's
// directory or named by the live configuration, with errors that reveal
// nothing of the file. Safe for concurrent use.
type fileReader struct {
	guard *fileGuard

	mu   sync.Mutex
	read map[string]bool
}

// fileGuard is what a posted candidate may read.
type fileGuard struct {
	// dir is the live configuration's directory as written (absolute)
	// and real its resolved form.
	dir, real string
	// live holds the files the live configuration read.
	live map[string]bool
}

// newFileGuard returns the guard for candidates beside the configuration
// at path, whose compile read the files of live.
func newFileGuard(path string, live map[string]bool) *fileGuard {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		dir = filepath.Dir(path)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	return &fileGuard{dir: dir, real: real, live: live}
}

// admit returns the path to open for name, or why a candidate may not
// read it. A name outside the directory, after `..` is resolved, is
// refused before the file system is asked anything about it.
func (g *fileGuard) admit(name string) (string, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", errUnreadable
	}
	if g.live[abs] {
		return abs, nil
	}
	if !inDir(abs, g.dir) && !inDir(abs, g.real) {
		return "", errOutsideDir
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", errUnreadable
	}
	if !g.live[real] && !inDir(real, g.real) {
		return "", errOutsideDir // a symlink out of the directory
	}
	return real, nil
}

// inDir reports whether the clean absolute path p lies inside dir.
func inDir(p, dir string) bool {
	return strings.HasPrefix(p, dir+string(filepath.Separator)) || dir == string(filepath.Separator) && p != dir
}

// ReadFile reads the file name, as policy.Compile's readFile.
func (r *fileReader) ReadFile(name string) ([]byte, error) {
	path := name
	if r.guard != nil {
		var err error
		if path, err = r.guard.admit(name); err != nil {
			return nil, err
		}
	}
	b, err := readRegular(path)
	if err != nil {
		if r.guard != nil {
			return nil, errUnreadable
		}
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read == nil {
		r.read = make(map[string]bool)
	}
	if abs, err := filepath.Abs(name); err == nil {
		r.read[abs] = true
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		r.read[real] = true
	}
	return b, nil
}

// files returns the set of paths read so far.
func (r *fileReader) files() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.read))
	for k := range r.read {
		out[k] = true
	}
	return out
}

// readRegular reads the regular file at path, at most maxNamedFile bytes,
// refusing FIFOs, devices and directories (package regularfile).
func readRegular(path string) ([]byte, error) { return regularfile.Read(path, maxNamedFile) }
