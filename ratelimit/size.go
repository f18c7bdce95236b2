package ratelimit

import (
	"fmt"
	"strings"
	"time"
)

// MaxStateBytes bounds the memory one key of a limit may take at worst
// (Limit.StateBytes): 64 MiB. Only sliding_window_log can come near it,
// since its state grows with the limit; Validate refuses a limit above it,
// because a handful of clients could otherwise make the gateway (or a
// shared Redis) hold gigabytes.
const MaxStateBytes = 64 << 20

// Worst-case sizes of the window states, in bytes, as the state types of
// package window hold them (the Redis store's encodings are smaller); that
// package's tests check them against its types.
const (
	logEntryBytes      = 16 // a sliding-log entry: timestamp and units
	logHeaderBytes     = 48 // LogState without its ring
	counterHeaderBytes = 32 // SlidingCounterState without its counts
)

// StateBytes returns the most memory the window states of one key of l can
// take, in bytes: 16 per unit of a sliding_window_log's limit (one entry per
// tick that counted, at most L), 8 per sub-bucket of a
// sliding_window_counter, a fixed few bytes otherwise. A store adds its own
// overhead per key (the key, its index entry).
func (l *Limit) StateBytes() int64 {
	if l.Algorithm == Concurrency {
		return 8
	}
	if l.Algorithm == Distinct {
		return l.distinctStateBytes()
	}
	var n int64
	for i := range l.Rates {
		n += windowBytes(l.Algorithm, l.Rates[i], l.Precision)
	}
	return n
}

func windowBytes(a Algorithm, r Rate, precision time.Duration) int64 {
	switch a {
	case SlidingWindowLog:
		return logHeaderBytes + logEntryBytes*r.Limit
	case SlidingWindowCounter:
		buckets := int64(1)
		if precision > 0 {
			buckets = int64(r.Window / precision)
		}
		return counterHeaderBytes + 8*(buckets+1)
	case GCRA:
		return 8
	case Quota:
		return 24
	default:
		return 16
	}
}

// checkStateBytes refuses a definition whose key could take more than
// MaxStateBytes.
func (l *Limit) checkStateBytes() error {
	if b := l.StateBytes(); b > MaxStateBytes {
		if l.Algorithm == SlidingWindowLog {
			return fmt.Errorf("sliding_window_log keeps a %d-byte entry per unit it counts: limits %s can take %d bytes per key, more than the %d allowed; lower the limit or use sliding_window_counter",
				logEntryBytes, ratesString(l.Rates), b, MaxStateBytes)
		}
		return fmt.Errorf("one key can take %d bytes, more than the %d allowed", b, MaxStateBytes)
	}
	return nil
}

func ratesString(rs []Rate) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}
