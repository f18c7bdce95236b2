package topk

import (
	"sort"
	"time"
)

// bucketsPerSpan is how many buckets divide a span; one more is kept so
// that a report covers at least the whole span (at most span + span/4).
const bucketsPerSpan = 4

// window is a ring of sketches, each counting one bucket of time; the
// oldest is reset and reused when time moves on, so memory stays bounded.
type window struct {
	bucket time.Duration
	ring   [bucketsPerSpan + 1]struct {
		epoch int64
		s     *Sketch
	}
}

func newWindow(span time.Duration, k int) *window {
	w := &window{bucket: span / bucketsPerSpan}
	for i := range w.ring {
		w.ring[i].epoch = -1
		w.ring[i].s = NewSketch(k)
	}
	return w
}

func (w *window) add(now int64, fp uint64, kind, value string) {
	e := now / int64(w.bucket)
	b := &w.ring[e%int64(len(w.ring))]
	if b.epoch != e {
		b.epoch = e
		b.s.Reset()
	}
	b.s.Add(fp, kind, value, 1)
}

// Entry is one client of a report. Count overestimates the client's true
// count by at most Error: the true count is in [Count-Error, Count].
type Entry struct {
	// Client is the identity as the access log shows it: hashed unless
	// raw values are allowed (never for an API key).
	Client string `json:"client"`
	// Kind is the identity's source ("ip", "api_key", "user", ...).
	Kind string `json:"kind"`
	// Count is the estimated count (an upper bound).
	Count uint64 `json:"count"`
	// Error is the most Count may overestimate by.
	Error uint64 `json:"error"`
	// Guaranteed is set when Count-Error exceeds every count an unlisted
	// client may have had: the client is certainly among the heaviest.
	Guaranteed bool `json:"guaranteed"`

	fp    uint64
	value string
}

// Report is the top clients of one sketch kind over one span.
type Report struct {
	// Total is the number of events counted over the span.
	Total uint64 `json:"total"`
	// Unlisted is the most any client not in Clients may have had.
	Unlisted uint64 `json:"unlisted_max"`
	// Clients are the heaviest clients, heaviest first.
	Clients []Entry `json:"clients"`
}

// report merges the buckets of the span ending at now: a client missing
// from a full bucket may have had up to that bucket's smallest count there,
// which is added to both its count and its error (the sum of Space-Saving
// summaries stays an overestimate with a known bound).
func (w *window) report(now int64, n int) Report {
	e := now / int64(w.bucket)
	type acc struct {
		kind, value string
		count, err  uint64
		seen        []bool
	}
	var buckets []*Sketch
	for i := range w.ring {
		b := &w.ring[i]
		if b.epoch >= 0 && b.epoch <= e && b.epoch > e-int64(len(w.ring)) {
			buckets = append(buckets, b.s)
		}
	}
	m := map[uint64]*acc{}
	var r Report
	var missingMax uint64 // a client in no bucket
	for bi, s := range buckets {
		r.Total += s.Total()
		if s.Full() {
			missingMax += s.Min()
		}
		s.Each(func(fp uint64, kind, value string, count, err uint64) {
			a := m[fp]
			if a == nil {
				a = &acc{kind: kind, value: value, seen: make([]bool, len(buckets))}
				m[fp] = a
			}
			a.count += count
			a.err += err
			a.seen[bi] = true
		})
	}
	for fp, a := range m {
		for bi, s := range buckets {
			if !a.seen[bi] && s.Full() {
				a.count += s.Min()
				a.err += s.Min()
			}
		}
		r.Clients = append(r.Clients, Entry{Kind: a.kind, Count: a.count, Error: a.err, fp: fp, value: a.value})
	}
	sort.Slice(r.Clients, func(i, j int) bool {
		a, b := r.Clients[i], r.Clients[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.fp < b.fp
	})
	if len(r.Clients) > n {
		// A client cut here may have had up to its count.
		missingMax = max(missingMax, r.Clients[n].Count)
		r.Clients = r.Clients[:n]
	}
	r.Unlisted = missingMax
	for i := range r.Clients {
		c := &r.Clients[i]
		c.Guaranteed = c.Count-c.Error > missingMax
	}
	if r.Clients == nil {
		r.Clients = []Entry{}
	}
	return r
}
