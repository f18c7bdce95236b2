// Package regularfile reads the files a configuration names (the
// configuration itself, secrets, keys, certificates) without letting the
// name make the gateway wait or read without end: a FIFO, a device such
// as /dev/zero or a directory is refused, and so is a file beyond a bound.
package regularfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Read reads the regular file at path, at most max bytes (a larger file
// is an error). O_NONBLOCK keeps the open of a FIFO from waiting for a
// writer; the type is checked on the opened file, so it cannot change in
// between. A final symlink is followed once resolved, so that O_NOFOLLOW
// holds for the file actually opened.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			real, rerr := filepath.EvalSymlinks(path)
			if rerr != nil {
				return nil, err
			}
			f, err = os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %s", path, size(max))
	}
	return b, nil
}

// size writes n bytes in the largest unit that divides it.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
