package usage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// noticeKey names one threshold of one consumer's limit window in one
// period: at most one notice each. The window is named by its period
// ("month", "1h0m0s"), not its index: a plan or a reload with other
// rates has other windows at the same index, and another window is
// another budget.
type noticeKey struct {
	consumer, limit string
	period          string
	start           int64
	threshold       float64
}

// notice is a crossing waiting to be claimed or posted.
type notice struct {
	k        noticeKey
	plan     string
	rate     string
	period   string
	end      int64
	used     int64
	capacity int64
	at       time.Time
}

// id is the notice's CloudEvents id and claim key: the same in every
// gateway, so a receiver also deduplicates a notice that two gateways
// posted (a claim that failed open cannot double it).
func (k noticeKey) id() string {
	h := sha256.New()
	for _, s := range []string{k.consumer, k.limit, k.period, strconv.FormatInt(k.start, 10),
		strconv.FormatFloat(k.threshold, 'g', -1, 64)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "notice-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// noticeBook remembers the crossings this process saw (until their
// period ends), so a request past a threshold costs one map lookup, and
// holds the notices waiting for the sender.
type noticeBook struct {
	mu      sync.Mutex
	max     int
	seen    map[noticeKey]int64 // period end, microseconds
	pending []notice            // crossed, not yet claimed
	ready   []notice            // claimed (or no claimer), not yet posted
}

func (b *noticeBook) init(max int) {
	b.max = max
	b.seen = make(map[noticeKey]int64)
}

// crossed records a crossing; it reports false when the book was full
// (the crossing is then forgotten: dropped).
func (b *noticeBook) crossed(n notice) (added, full bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen[n.k]; ok {
		return false, false
	}
	if len(b.seen) >= b.max {
		now := n.at.UnixMicro()
		for k, end := range b.seen {
			if end <= now {
				delete(b.seen, k)
			}
		}
	}
	// The waiting notices are bounded on their own: a crossing forgotten
	// when its period ended may still wait for its claim.
	if len(b.seen) >= b.max || len(b.pending)+len(b.ready) >= b.max {
		return false, true
	}
	b.seen[n.k] = n.end
	b.pending = append(b.pending, n)
	return true, false
}

// seenAlready reports whether k's crossing is remembered.
func (b *noticeBook) seenAlready(k noticeKey) bool {
	b.mu.Lock()
	_, ok := b.seen[k]
	b.mu.Unlock()
	return ok
}

// sweep forgets crossings whose period has ended.
func (b *noticeBook) sweep(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now.UnixMicro()
	for k, end := range b.seen {
		if end <= t {
			delete(b.seen, k)
		}
	}
}

// checkThresholds looks at a hit's decision: the window it reports (the
// one closest to its limit) and its usage after the request; a fraction
// of notify_at first reached in the window's period is a notice.
//
// decided is the decision's instant, at the units' (later for a hit
// counted by response).
func (e *Exporter) checkThresholds(consumer, plan string, h *ratelimit.Hit, d *ratelimit.Decision, decided, at time.Time, units int64, fs []float64) {
	l := h.Limit
	if d.Limit <= 0 || d.Window < 0 || d.Window >= len(l.Rates) || (d.Penalty && !d.Counted) {
		// A penalty box's denial checked no window: its Remaining says
		// nothing of the usage.
		return
	}
	used := d.Limit - d.Remaining
	if h.Mode == ratelimit.HitPeek {
		// Counted by response: the decision saw the window before the
		// units were taken.
		used += units
		if !decided.Equal(at) {
			_, was, _ := e.periods.of(l, d.Window, decided)
			if _, is, _ := e.periods.of(l, d.Window, at); was != is {
				// Answered in a later period than it was decided in:
				// the decision's window is not the one the units went
				// to, whose usage is unknown here (a later request's
				// decision will show it).
				return
			}
		}
	}
	if used <= 0 {
		return
	}
	var name string
	var start, end int64
	for _, f := range fs {
		if float64(used) < f*float64(d.Limit) {
			break // fs ascend
		}
		if name == "" {
			name, start, end = e.periods.of(l, d.Window, at)
		}
		k := noticeKey{consumer: consumer, limit: l.Name, period: name, start: start, threshold: f}
		if e.notices.seenAlready(k) {
			continue // the common case past a threshold: one lookup
		}
		n := notice{k: k, plan: plan, rate: l.Rates[d.Window].String(), period: name, end: end, used: used,
			capacity: d.Limit, at: at}
		if _, full := e.notices.crossed(n); full {
			e.dropped.Add(1)
			if s, ok := e.dropLog.Allow(time.Now()); ok {
				e.log.Warn("usage: threshold notices full; a crossing is not noticed (the sink or the claim store is behind)",
					"max_pending", e.o.MaxPending, "consumer", consumer, "limit", l.Name, "threshold", f, "suppressed", s)
			}
		}
	}
}

// claimNotices claims the pending crossings (one gateway of the fleet
// wins each) and makes the won ones ready to post. A claim that fails is
// tried again next cycle.
func (e *Exporter) claimNotices(ctx context.Context) {
	b := &e.notices
	b.sweep(time.Now())
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	var won, retry []notice
	for i, n := range pending {
		if e.o.Claimer == nil {
			won = append(won, n)
			continue
		}
		// The rest of the period by the clock that decided the crossing
		// (the store's, with store.clock = "redis"), not this process's:
		// a gateway clock ahead of it would let the claim expire while
		// the period still runs, and another gateway notice again.
		ttl := time.UnixMicro(n.end).Sub(n.at) + time.Minute
		cctx, cancel := context.WithTimeout(ctx, e.o.Timeout)
		ok, err := e.o.Claimer.Claim(cctx, e.o.ClaimPrefix+"usage:notice:"+n.k.id(), e.instance, max(ttl, time.Second))
		cancel()
		switch {
		case err != nil:
			if s, allow := e.claimLog.Allow(time.Now()); allow {
				e.log.Warn("usage: claiming a threshold notice failed; retried next flush", "err", err, "suppressed", s)
			}
			retry = append(retry, pending[i:]...)
		case ok:
			won = append(won, n)
		}
		if err != nil {
			break
		}
	}
	b.mu.Lock()
	b.pending = append(retry, b.pending...)
	b.ready = append(b.ready, won...)
	b.mu.Unlock()
}

// takeReady returns the notices ready to post and forgets them.
func (e *Exporter) takeReady() []notice {
	b := &e.notices
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ready
	b.ready = nil
	return r
}

// unready puts back notices a cycle did not get to post.
func (e *Exporter) unready(ns []notice) {
	if len(ns) == 0 {
		return
	}
	b := &e.notices
	b.mu.Lock()
	b.ready = append(ns, b.ready...)
	b.mu.Unlock()
}

// pendingNotices counts the notices not yet posted.
func (e *Exporter) pendingNotices() int {
	b := &e.notices
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) + len(b.ready)
}
