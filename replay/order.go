package replay

import (
	"io"
	"math"
	"time"

	"github.com/tollgate/gateway/accesslog"
)

// The access log writes a line when its request finishes but stamps it
// with the instant the request started (when it was decided), so a slow
// request's line comes after the lines of faster requests that started
// later. Replay decides in time order: a reorder buffer holds each line
// until no line still to come can start before it. A line can start at
// most the longest latency before the finish of the line that precedes
// it, so a line is released once it starts more than the window (the
// longest latency, plus a margin for lines written a moment out of finish
// order) before the latest finish read. A line that still comes after a
// later one was decided (its latency exceeds the window, or the buffer
// was full) is decided at the latest instant decided so far: replay time
// never runs backwards. Report.Late counts such lines.

// DefaultMaxBuffered is the reorder buffer's bound when
// Options.MaxBuffered is 0.
const DefaultMaxBuffered = 1 << 18

// writeMargin is added to the longest latency: the lines of requests that
// finish together may be written a little out of finish order.
const writeMargin = time.Second

// longestLatency reads the whole log once for its longest latency and
// seeks back to where it was. ok is false when log cannot seek (a pipe),
// and then the window grows with the longest latency seen so far.
func longestLatency(log io.Reader, f accesslog.Format) (d time.Duration, ok bool, err error) {
	rs, isSeeker := log.(io.ReadSeeker)
	if !isSeeker {
		return 0, false, nil
	}
	pos, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, false, nil // not seekable after all
	}
	if d, err = accesslog.LongestLatency(rs, f); err != nil {
		return 0, false, err
	}
	if _, err := rs.Seek(pos, io.SeekStart); err != nil {
		return 0, false, err
	}
	return d, true, nil
}

// reorder is the buffer: a min-heap of jobs by (start, line order).
type reorder struct {
	jobs   jobHeap
	window time.Duration // latency allowed for (margin included)
	grow   bool          // the window follows the longest latency seen
	max    int           // bound on buffered jobs
	latest time.Time     // the latest finish read
	seq    int64
}

func newReorder(window time.Duration, grow bool, maxBuffered int) *reorder {
	return &reorder{window: withMargin(window), grow: grow, max: maxBuffered}
}

// withMargin adds writeMargin to d without overflowing (a hostile log may
// claim a latency of centuries: the buffer's bound keeps that in check).
func withMargin(d time.Duration) time.Duration {
	if d > math.MaxInt64-writeMargin {
		return math.MaxInt64
	}
	return d + writeMargin
}

// push adds the job of a line that started at j.at and took latency.
func (o *reorder) push(j job, latency time.Duration) {
	if w := withMargin(latency); o.grow && w > o.window {
		o.window = w
	}
	if f := j.at.Add(latency); f.After(o.latest) {
		o.latest = f
	}
	j.seq = o.seq
	o.seq++
	o.jobs.push(j)
}

// pop releases the earliest job if no line still to come can start before
// it (or the buffer is over its bound, or all is set at the end of the
// log); ok is false when nothing may be released yet.
func (o *reorder) pop(all bool) (j job, ok bool) {
	if len(o.jobs) == 0 {
		return job{}, false
	}
	full := len(o.jobs) > o.max
	if !all && !full && !o.jobs[0].at.Before(o.latest.Add(-o.window)) {
		return job{}, false
	}
	return o.jobs.pop(), true
}

// jobHeap is a binary min-heap of jobs by start, then line order (typed,
// so that a push does not box its job as container/heap would).
type jobHeap []job

func (h jobHeap) less(a, b int) bool {
	if !h[a].at.Equal(h[b].at) {
		return h[a].at.Before(h[b].at)
	}
	return h[a].seq < h[b].seq
}

func (h *jobHeap) push(j job) {
	*h = append(*h, j)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *jobHeap) pop() job {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = job{}
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s.less(l, m) {
			m = l
		}
		if r := l + 1; r < n && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
