package usage

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// shards spreads the aggregate's lock over the request path's goroutines.
const shards = 32

// key names one record: a consumer's usage of a limit in one period.
type key struct {
	consumer, limit string
	// period is "day", "week" or "month" for a quota's calendar period,
	// the window's length (e.g. "1m0s") otherwise.
	period string
	start  int64 // microseconds since the epoch
}

// entry is the units a key counted since its last record was cut.
type entry struct {
	plan     string
	end      int64
	units    int64
	requests int64
	// born is the sender's cycle during which the entry was created; a
	// cycle cuts only entries born before it began, so one key yields at
	// most one record per cycle.
	born uint64
}

// aggregate is the sharded map of entries, bounded to max entries.
type aggregate struct {
	seed  maphash.Seed
	max   int64
	n     atomic.Int64
	cycle atomic.Uint64
	s     [shards]aggShard
}

// aggShard is one lock's part of the aggregate.
type aggShard struct {
	mu sync.Mutex
	m  map[key]*entry
	_  [48]byte // keep shards' locks on separate cache lines
}

func (a *aggregate) init(max int) {
	a.seed = maphash.MakeSeed()
	a.max = int64(max)
	for i := range a.s {
		a.s[i].m = make(map[key]*entry)
	}
}

// shard returns the shard holding k: all of a consumer's entries of one
// limit in one shard, hashed without building a string.
func (a *aggregate) shard(k key) *aggShard {
	var h maphash.Hash
	h.SetSeed(a.seed)
	h.WriteString(k.consumer)
	h.WriteByte(0)
	h.WriteString(k.limit)
	return &a.s[h.Sum64()%shards]
}

func (a *aggregate) len() int64 { return a.n.Load() }

// add adds units to k's entry, creating it unless max entries are held;
// it reports false when the units were dropped.
func (a *aggregate) add(k key, plan string, end, units int64) bool {
	sh := a.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	en := sh.m[k]
	if en == nil {
		if a.n.Add(1) > a.max {
			a.n.Add(-1)
			return false
		}
		en = &entry{end: end, born: a.cycle.Load()}
		sh.m[k] = en
	}
	en.plan = plan
	en.units += units
	en.requests++
	return true
}

// eligible returns the keys of the entries born before cycle, the oldest
// periods first: the records a cycle cuts.
func (a *aggregate) eligible(cycle uint64) []key {
	var out []key
	for i := range a.s {
		sh := &a.s[i]
		sh.mu.Lock()
		for k, en := range sh.m {
			if en.born < cycle {
				out = append(out, k)
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y key) int {
		return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.consumer, y.consumer),
			cmp.Compare(x.limit, y.limit), cmp.Compare(x.period, y.period))
	})
	return out
}

// take removes the entries of ks, with the units they hold now, and
// returns them.
func (a *aggregate) take(ks []key) []cutEntry {
	out := make([]cutEntry, 0, len(ks))
	for _, k := range ks {
		sh := a.shard(k)
		sh.mu.Lock()
		if en := sh.m[k]; en != nil {
			out = append(out, cutEntry{k, *en})
			delete(sh.m, k)
			a.n.Add(-1)
		}
		sh.mu.Unlock()
	}
	return out
}

// drain empties the aggregate and returns the entries and units it held.
func (a *aggregate) drain() (n int, units int64) {
	for i := range a.s {
		sh := &a.s[i]
		sh.mu.Lock()
		for k, en := range sh.m {
			n++
			units += en.units
			delete(sh.m, k)
		}
		sh.mu.Unlock()
	}
	a.n.Store(0)
	return n, units
}

// cutEntry is an entry taken out of the aggregate with its key.
type cutEntry struct {
	k key
	e entry
}

// periodOf returns the period of window w of limit l at t: for a quota
// its calendar period, otherwise the aligned window [floor(t/W)·W, +W)
// since the Unix epoch.
func periodOf(l *ratelimit.Limit, w int, t time.Time) (name string, start, end int64) {
	if l.Algorithm == ratelimit.Quota {
		if s, e, ok := l.PeriodAt(w, t); ok {
			return l.PeriodOf(w).String(), s.UnixMicro(), e.UnixMicro()
		}
	}
	win := l.Rates[w].Window.Microseconds()
	if win <= 0 {
		win = 1
	}
	now := t.UnixMicro()
	start = now - now%win
	if now < 0 && now%win != 0 {
		start -= win
	}
	return l.Rates[w].Window.String(), start, start + win
}

// span is one period, as the periods cache holds it.
type span struct {
	name       string
	start, end int64
}

// maxSpans bounds the periods cache (limit definitions: a reload makes
// new ones); past it the cache starts afresh.
const maxSpans = 4096

// periods caches the current period of each limit window, so that the
// request path computes a calendar period once per period rather than
// once per request.
type periods struct {
	m sync.Map // *ratelimit.Limit → []atomic.Pointer[span], one per window
	n atomic.Int64
}

// of returns periodOf(l, w, t), from the cache when t is in the period
// last computed for l's window w.
func (p *periods) of(l *ratelimit.Limit, w int, t time.Time) (string, int64, int64) {
	v, ok := p.m.Load(l) // a pointer key: no allocation
	if !ok {
		if p.n.Add(1) > maxSpans {
			p.m.Clear()
			p.n.Store(1)
		}
		v, _ = p.m.LoadOrStore(l, make([]atomic.Pointer[span], len(l.Rates)))
	}
	ptr := &v.([]atomic.Pointer[span])[w]
	us := t.UnixMicro()
	if s := ptr.Load(); s != nil && s.start <= us && us < s.end {
		return s.name, s.start, s.end
	}
	name, start, end := periodOf(l, w, t)
	ptr.Store(&span{name, start, end})
	return name, start, end
}

// add puts units counted by consumer on l at t into the aggregate.
func (e *Exporter) add(consumer, plan string, l *ratelimit.Limit, t time.Time, units int64) {
	name, start, end := e.periods.of(l, len(l.Rates)-1, t)
	if e.agg.add(key{consumer: consumer, limit: l.Name, period: name, start: start}, plan, end, units) {
		return
	}
	e.droppedUnits.Add(units)
	if n, ok := e.dropLog.Allow(time.Now()); ok {
		e.log.Warn("usage: aggregate full; units of a new consumer, limit or period dropped (the sink is behind)",
			"max_pending", e.o.MaxPending, "units", units, "consumer", consumer, "limit", l.Name, "suppressed", n)
	}
}
