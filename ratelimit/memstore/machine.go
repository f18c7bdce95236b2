package memstore

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// DefaultMaxBytesFraction is the share of the machine's memory the store
// may hold when Options.MaxBytes is 0: a quarter, leaving the rest to the
// proxy's buffers, the Go runtime's headroom (the heap may grow to twice
// the live data before a collection) and the rest of the machine.
const DefaultMaxBytesFraction = 4

// fallbackMaxBytes is the bound used when the machine's memory cannot be
// read: 1 GiB.
const fallbackMaxBytes = 1 << 30

// DefaultMaxBytes returns the memory bound used when Options.MaxBytes is
// 0: MachineMemory / DefaultMaxBytesFraction, or 1 GiB when the machine's
// memory is unknown.
func DefaultMaxBytes() int64 {
	if m := MachineMemory(); m > 0 {
		return m / DefaultMaxBytesFraction
	}
	return fallbackMaxBytes
}

var machineMemory = sync.OnceValue(readMachineMemory)

// MachineMemory returns the memory this process may use, in bytes: the
// smaller of the machine's total (MemTotal in /proc/meminfo) and the
// memory limit of its control group (cgroup v2 memory.max or v1
// memory.limit_in_bytes), or 0 when neither can be read. It is read once.
func MachineMemory() int64 { return machineMemory() }

func readMachineMemory() int64 {
	total := memTotal("/proc/meminfo")
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if l := cgroupLimit(f); l > 0 && (total == 0 || l < total) {
			total = l
		}
	}
	return total
}

// memTotal returns MemTotal from a meminfo file, in bytes (0 if absent).
func memTotal(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit returns a cgroup memory limit in bytes: 0 when the file is
// absent, says "max", or holds v1's "no limit" (a number near 2^63).
func cgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0
	}
	return v
}
