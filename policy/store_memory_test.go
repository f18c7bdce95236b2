package policy

import (
	"strings"
	"testing"
)

// TestMemoryMaxBytes: 0 derives the bound from the machine; otherwise at
// least 1 MiB (less would evict on almost every new key).
func TestMemoryMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, ""},
		{1 << 20, ""},
		{1 << 40, ""},
		{1<<20 - 1, "store.memory.max_bytes: must be 0 (derived from the machine's memory) or at least 1048576, got 1048575"},
		{-1, "store.memory.max_bytes: must be 0 (derived from the machine's memory) or at least 1048576, got -1"},
	} {
		c := base()
		c.Store.Memory.MaxBytes = tc.v
		err := validate(&c)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("max_bytes %d: Validate() = %v, want %q", tc.v, err, tc.want)
		}
	}
}
