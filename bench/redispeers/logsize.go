package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// logSizes are the sliding_window_log lengths (entries in the one window)
// runLogSize measures.
var logSizes = []int{100, 250, 500, 1000, 2000, 4000, 8000, 16000, 64000, 256000, 1000000, 4000000}

// logSizeRow is what one decision on a key holding a log of entries costs
// Redis.
type logSizeRow struct {
	entries             int
	valueBytes          int64
	allowedUsec, denied float64 // FCALL usec_per_call (INFO commandstats)
}

// logBlob is a sliding_window_log state of one window as the Redis store
// encodes it (lua/sliding_log.lua): a 4-byte length, then a 7-byte base
// instant and per entry a 6-byte offset from it and a 2-byte unit count.
// The n entries are one unit each, a microsecond apart, ending at end.
func logBlob(n int, end int64) []byte {
	blob := make([]byte, 4+7+8*n)
	binary.BigEndian.PutUint32(blob, uint32(7+8*n))
	base := end - int64(n)
	var b8 [8]byte
	binary.BigEndian.PutUint64(b8[:], uint64(base))
	copy(blob[4:11], b8[1:])
	for i := range n {
		e := blob[11+8*i:]
		binary.BigEndian.PutUint64(b8[:], uint64(i))
		copy(e[:6], b8[2:])
		binary.BigEndian.PutUint16(e[6:8], 1)
	}
	return blob
}

// runLogSize measures, for each length in logSizes, what one decision on a
// key whose sliding_window_log holds that many entries costs Redis: the
// key written directly (a log that long takes as many admitted requests to
// build), then reps decisions that admit (decode, append, encode, SET) and
// reps that deny (decode only), each timed by Redis itself (INFO
// commandstats, FCALL usec per call).
func runLogSize(ctx context.Context, srv *server, reps int) ([]logSizeRow, error) {
	c := newClient(srv.addr, 4)
	c.Options().ReadTimeout = 2 * time.Minute // the longest logs take seconds
	defer c.Close()
	st, err := redisstore.New(c, redisstore.Options{Prefix: "logsize:", Clock: ratelimit.ClockStore,
		Timeout: time.Minute, DenyCacheSize: -1})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := st.Ready(ctx); err != nil {
		return nil, err
	}
	var rows []logSizeRow
	for _, n := range logSizes {
		row := logSizeRow{entries: n}
		reps := reps
		if n >= 100000 {
			reps = 3 // seconds each
		}
		for _, allowed := range []bool{true, false} {
			// Allowed: room for every decision; denied: the log is full.
			limit := int64(n + 10*reps)
			if !allowed {
				limit = int64(n)
			}
			l := ratelimit.Limit{Name: fmt.Sprintf("log%d-%v", n, allowed), Algorithm: ratelimit.SlidingWindowLog,
				Rates: []ratelimit.Rate{{Limit: limit, Window: time.Hour}}}
			if err := l.Finish(); err != nil {
				return nil, err
			}
			hits := []ratelimit.Hit{{Limit: &l, Key: "k", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			tm, err := c.Time(ctx).Result()
			if err != nil {
				return nil, err
			}
			blob := logBlob(n, tm.UnixMicro()-1000)
			key := st.Key(&l, "k")
			if err := c.Set(ctx, key, blob, time.Hour).Err(); err != nil {
				return nil, err
			}
			row.valueBytes = int64(len(blob))
			calls0, usec0, err := commandCalls(ctx, c)
			if err != nil {
				return nil, err
			}
			for range reps {
				ok, err := st.Decide(ctx, time.Now(), hits, out)
				if err != nil {
					return nil, fmt.Errorf("%d entries: %w", n, err)
				}
				if ok != allowed {
					return nil, fmt.Errorf("%d entries: allowed %v, want %v", n, ok, allowed)
				}
			}
			calls1, usec1, err := commandCalls(ctx, c)
			if err != nil {
				return nil, err
			}
			per := float64(usec1["fcall"]-usec0["fcall"]) / float64(calls1["fcall"]-calls0["fcall"])
			if allowed {
				row.allowedUsec = per
			} else {
				row.denied = per
			}
			c.Del(ctx, key)
		}
		rows = append(rows, row)
		fmt.Fprintf(os.Stderr, "%d entries: %.0f µs admitted, %.0f µs denied\n", n, row.allowedUsec, row.denied)
	}
	return rows, nil
}

func printLogSize(w io.Writer, rows []logSizeRow) {
	fmt.Fprintln(w, "| log entries | value bytes | FCALL µs, admitted | FCALL µs, denied | µs per 1000 entries (admitted) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %d | %.0f | %.0f | %.1f |\n", r.entries, r.valueBytes, r.allowedUsec, r.denied,
			r.allowedUsec/float64(r.entries)*1000)
	}
}
