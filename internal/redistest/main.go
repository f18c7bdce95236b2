package redistest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Main is a testing.TB for use in TestMain, where processes shared by every
// test of a package are started once (a Cluster or Sentinel group takes
// seconds to form). Fatalf prints the message, runs the cleanups and exits
// with status 1; Close runs the cleanups, last registered first. Only the
// methods the harness calls are implemented.
type Main struct {
	testing.TB // nil: calling another method panics

	mu       sync.Mutex
	cleanups []func()
}

// Helper implements testing.TB.
func (m *Main) Helper() {}

// Cleanup implements testing.TB.
func (m *Main) Cleanup(f func()) {
	m.mu.Lock()
	m.cleanups = append(m.cleanups, f)
	m.mu.Unlock()
}

// Fatalf implements testing.TB: print, clean up, exit 1.
func (m *Main) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	m.Close()
	os.Exit(1)
}

// Logf implements testing.TB.
func (m *Main) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Close runs the registered cleanups, last first.
func (m *Main) Close() {
	m.mu.Lock()
	c := m.cleanups
	m.cleanups = nil
	m.mu.Unlock()
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}
