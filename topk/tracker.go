package topk

import (
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultK is the number of clients each sketch keeps by default.
const DefaultK = 100

// Spans are the spans a report may cover.
var Spans = map[string]time.Duration{"1m": time.Minute, "15m": 15 * time.Minute}

// Tracker keeps, per limit, the sketches of denied and near-limit clients
// over each span, and the limit's decision counts. It is safe for
// concurrent use. Memory: a limit's sketches are made on its first denied
// or near-limit decision, 2 kinds × 2 spans × 5 buckets × k entries.
type Tracker struct {
	k     int
	label func(kind, value string) string
	seed  maphash.Seed

	mu     sync.Mutex                        // serialises adding limits
	limits atomic.Pointer[map[string]*Limit] // copy on write

	// Store is the store's recent latency and errors, as the request
	// path saw them.
	Store Latency
}

// Limit is one limit's state in a Tracker.
type Limit struct {
	// Counts of decisions since the gateway started (or the limit first
	// decided): what the metrics report, per limit.
	Allowed, Denied, ShadowDenied, Near atomic.Uint64
	rates                               rateRing

	mu     sync.Mutex
	denied [2]*window // by span: 1m, 15m
	near   [2]*window
}

// New returns a Tracker keeping k clients per sketch (DefaultK when k < 1).
// label turns an identity into what reports show (hashed as the access
// log does); nil shows "".
func New(k int, label func(kind, value string) string) *Tracker {
	if k < 1 {
		k = DefaultK
	}
	if label == nil {
		label = func(string, string) string { return "" }
	}
	t := &Tracker{k: k, label: label, seed: maphash.MakeSeed()}
	m := map[string]*Limit{}
	t.limits.Store(&m)
	return t
}

// K is the number of clients each sketch keeps.
func (t *Tracker) K() int { return t.k }

// Limit returns the state of the limit name, creating it.
func (t *Tracker) Limit(name string) *Limit {
	if l := (*t.limits.Load())[name]; l != nil {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.limits.Load()
	if l := old[name]; l != nil {
		return l
	}
	m := make(map[string]*Limit, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	l := &Limit{}
	m[name] = l
	t.limits.Store(&m)
	return l
}

// Retain forgets every limit not in names (after a reload removed some),
// so that renamed limits do not keep memory.
func (t *Tracker) Retain(names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	m := map[string]*Limit{}
	for k, v := range *t.limits.Load() {
		if keep[k] {
			m[k] = v
		}
	}
	t.limits.Store(&m)
}

// Names are the limits the tracker holds, sorted.
func (t *Tracker) Names() []string {
	m := *t.limits.Load()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the state of the limit name, nil if it never decided.
func (t *Tracker) Lookup(name string) *Limit { return (*t.limits.Load())[name] }

// Record counts one decision of l at now for the client (kind, value).
// denied is the decision's outcome (shadow tells whether the limit only
// observes), near that an allowed decision left at most 10% of its
// window. A client is tracked only when denied or near and value is set.
// used is the share of the window (permille) the decision found used, -1
// when it reports none. It never allocates once l's sketches exist.
func (t *Tracker) Record(l *Limit, now time.Time, kind, value string, denied, shadow, near bool, used int64) {
	ns := now.UnixNano()
	switch {
	case denied && shadow:
		l.ShadowDenied.Add(1)
		l.rates.add(ns, 2, used)
	case denied:
		l.Denied.Add(1)
		l.rates.add(ns, 1, used)
	default:
		l.Allowed.Add(1)
		l.rates.add(ns, 0, used)
		if near {
			l.Near.Add(1)
		}
	}
	if value == "" || (!denied && !near) {
		return
	}
	fp := maphash.String(t.seed, value) ^ (maphash.String(t.seed, kind) * 0x9e3779b97f4a7c15)
	l.mu.Lock()
	ws := &l.near
	if denied {
		ws = &l.denied
	}
	if ws[0] == nil {
		ws[0], ws[1] = newWindow(time.Minute, t.k), newWindow(15*time.Minute, t.k)
	}
	ws[0].add(ns, fp, kind, value)
	ws[1].add(ns, fp, kind, value)
	l.mu.Unlock()
}

// Top is the answer of /admin/top for one limit and span.
type Top struct {
	Limit string `json:"limit"`
	Span  string `json:"span"`
	K     int    `json:"k"`
	// Denied are the clients most often denied (including a shadow
	// limit's would-be denials); Near those most often allowed with at
	// most 10% of the window left.
	Denied Report `json:"denied"`
	Near   Report `json:"near_limit"`
}

// Top reports the n heaviest clients of limit l over span ("1m" or "15m")
// ending at now.
func (t *Tracker) Top(name string, l *Limit, span string, now time.Time, n int) Top {
	i := 0
	if span == "15m" {
		i = 1
	}
	if n < 1 || n > t.k {
		n = t.k
	}
	out := Top{Limit: name, Span: span, K: t.k, Denied: Report{Clients: []Entry{}}, Near: Report{Clients: []Entry{}}}
	if l == nil {
		return out
	}
	ns := now.UnixNano()
	l.mu.Lock()
	if l.denied[i] != nil {
		out.Denied = l.denied[i].report(ns, n)
	}
	if l.near[i] != nil {
		out.Near = l.near[i].report(ns, n)
	}
	l.mu.Unlock()
	for _, r := range []*Report{&out.Denied, &out.Near} {
		for j := range r.Clients {
			c := &r.Clients[j]
			c.Client = t.label(c.Kind, c.value)
		}
	}
	return out
}
