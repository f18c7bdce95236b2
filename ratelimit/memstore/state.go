package memstore

import (
	"unsafe"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// kind says where and how a limit's state is held.
type kind uint8

// The kinds: one window of a small state type inline in entry.st, or a
// boxed cell.
const (
	kFixed    kind = iota // FixedWindowState inline (16 B)
	kElastic              // ElasticState inline (16 B)
	kBucket               // TokenBucketState inline (16 B)
	kGCRA                 // GCRAState inline (8 B)
	kConc                 // ConcurrencyState inline (8 B), then its incarnation (Store.incarnation)
	kCounter1             // SlidingCounterState with one bucket per window: Newest, Counts[2] inline (24 B)
	kQuota                // QuotaState inline (24 B)
	kBox                  // any other state: a cell in table.boxes
)

// Each inline state type must fit in entry.st and hold no pointers.
var _ = [1]struct{}{}[unsafe.Sizeof(window.FixedWindowState{})/25]
var _ = [1]struct{}{}[unsafe.Sizeof(window.ElasticState{})/25]
var _ = [1]struct{}{}[unsafe.Sizeof(window.TokenBucketState{})/25]
var _ = [1]struct{}{}[unsafe.Sizeof(window.GCRAState{})/25]
var _ = [1]struct{}{}[unsafe.Sizeof(window.ConcurrencyState{})/25]
var _ = [1]struct{}{}[unsafe.Sizeof(window.QuotaState{})/25]

// kindOf returns the kind of l's state.
func kindOf(l *ratelimit.Limit) kind {
	if l.Algorithm == ratelimit.Concurrency {
		return kConc
	}
	if len(l.Rates) != 1 {
		return kBox
	}
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		return kFixed
	case ratelimit.FixedWindowElastic:
		return kElastic
	case ratelimit.TokenBucket:
		return kBucket
	case ratelimit.GCRA:
		return kGCRA
	case ratelimit.Quota:
		return kQuota
	case ratelimit.SlidingWindowCounter:
		if l.Precision == 0 || l.Precision == l.Rates[0].Window {
			return kCounter1
		}
	}
	return kBox
}

// inline views e.st as a one-window []S. S is one of the pointer-free state
// types checked above, all of which fit in st and share its alignment.
func inline[S any](e *entry) []S {
	return unsafe.Slice((*S)(unsafe.Pointer(&e.st)), 1)
}

// op is one operation on a state.
type op uint8

const (
	opInit op = iota
	opCheck
	opTake
	opReport
	opUsage
	opExpiry
	opMark   // a.d.Mark = the state's time mark (delayable states)
	opCancel // give back a reservation of a.cost that left a.mark
	opReturn // give back a.cost units counted at a.now (batched states)
	opSettle // give back a.cost units a reservation counted at a.at, seen at a.now
)

// args are an operation's inputs and outputs. For opReport, cost is the
// cost opCheck decided on the same unchanged states, or 0 when they may
// have changed since (window.ReportChecked).
type args struct {
	now, cost int64
	value     uint64 // a distinct hit's value (ratelimit.Hit.Value)
	at        int64  // opSettle: the instant the units were counted at
	mark      float64
	d         *ratelimit.Decision
	out       []ratelimit.WindowUsage
}

// apply runs o on the states ws of l; it returns the expiry for opExpiry.
func apply[S any, P window.StatePtr[S]](o op, l *ratelimit.Limit, ws []S, a *args) int64 {
	switch o {
	case opInit:
		window.Init[S, P](l, ws, a.now)
	case opCheck:
		window.Check[S, P](l, ws, a.now, a.cost, a.d)
	case opTake:
		window.Take[S, P](l, ws, a.now, a.cost)
	case opReport:
		window.ReportChecked[S, P](l, ws, a.now, a.cost, a.d)
	case opUsage:
		window.Usage[S, P](l, ws, a.now, a.out)
	case opExpiry:
		return window.Expiry[S, P](l, ws)
	case opMark, opCancel:
		// Only delayable limits (one rate, an inline state) reserve.
		if r, ok := any(P(&ws[0])).(window.Reserver); ok {
			if o == opMark {
				a.d.Mark = r.Mark()
			} else {
				r.Cancel(l.ParamsOf(0), a.now, a.cost, a.mark)
			}
		}
	case opReturn:
		// Only batchable limits (one rate) lease.
		if r, ok := any(P(&ws[0])).(window.Returner); ok {
			r.Return(l.ParamsOf(0), a.now, a.cost)
		}
	case opSettle:
		window.GiveBack[S, P](l, ws, a.now, a.at, a.cost)
	}
	return 0
}

// state is where one hit's state is: an inline entry (the table's or a
// reserved one) or a boxed cell.
type state struct {
	k   kind
	idx int32 // entry holding an inline state (or the boxed state's entry when live)
	c   cell  // the boxed state
}

// apply runs o on s for l in t. Boxed init is done by newCell instead.
func (t *table) apply(s *state, o op, l *ratelimit.Limit, a *args) int64 {
	if s.k == kBox {
		if dc, ok := s.c.(*distinctCell); ok {
			return dc.apply(o, l, a)
		}
		switch o {
		case opCheck:
			s.c.check(l, a.now, a.cost, a.d)
		case opTake:
			s.c.take(l, a.now, a.cost)
		case opReport:
			s.c.report(l, a.now, a.cost, a.d)
		case opUsage:
			s.c.usage(l, a.now, a.out)
		case opExpiry:
			return s.c.expiry()
		case opReturn:
			s.c.giveBack(l, a.now, a.cost)
		case opSettle:
			s.c.settle(l, a.now, a.at, a.cost)
		}
		return 0
	}
	e := t.at(s.idx)
	switch s.k {
	case kFixed:
		return apply[window.FixedWindowState](o, l, inline[window.FixedWindowState](e), a)
	case kElastic:
		return apply[window.ElasticState](o, l, inline[window.ElasticState](e), a)
	case kBucket:
		return apply[window.TokenBucketState](o, l, inline[window.TokenBucketState](e), a)
	case kGCRA:
		return apply[window.GCRAState](o, l, inline[window.GCRAState](e), a)
	case kConc:
		return apply[window.ConcurrencyState](o, l, inline[window.ConcurrencyState](e), a)
	case kQuota:
		return apply[window.QuotaState](o, l, inline[window.QuotaState](e), a)
	default: // kCounter1: Newest in st[0], the two bucket counts in st[1:3]
		t.cv[0] = window.SlidingCounterState{Newest: e.st[0], Counts: e.st[1:3:3]}
		x := apply[window.SlidingCounterState](o, l, t.cv[:], a)
		e.st[0] = t.cv[0].Newest
		t.cv[0].Counts = nil
		return x
	}
}

// stateAt returns the state of the live entry i, whose limit l has kind k.
func (t *table) stateAt(i int32, k kind) state {
	s := state{k: k, idx: i}
	if k == kBox {
		s.c = t.boxes[t.at(i).st[0]]
	}
	return s
}

// expiry returns the expiry of the live entry i.
func (t *table) expiry(i int32) int64 {
	l := t.at(i).lim
	s := t.stateAt(i, kindOf(l))
	return t.expiryOf(&s, l)
}

// expiryOf is apply(opExpiry) with direct calls for the inline kinds
// (it runs on every lookup).
func (t *table) expiryOf(s *state, l *ratelimit.Limit) int64 {
	if s.k == kBox {
		return s.c.expiry()
	}
	e := t.at(s.idx)
	switch s.k {
	case kFixed:
		return inline[window.FixedWindowState](e)[0].Expiry(l.ParamsOf(0))
	case kElastic:
		return inline[window.ElasticState](e)[0].Expiry(nil)
	case kBucket:
		return inline[window.TokenBucketState](e)[0].Expiry(l.ParamsOf(0))
	case kGCRA:
		return inline[window.GCRAState](e)[0].Expiry(nil)
	case kConc:
		return inline[window.ConcurrencyState](e)[0].Expiry(nil)
	case kQuota:
		return inline[window.QuotaState](e)[0].Expiry(nil)
	}
	return t.apply(s, opExpiry, l, &args{})
}

// fresh returns a fresh state of l at now, not linked anywhere: a reserved
// entry for an inline kind, a new cell for a boxed one.
func (t *table) fresh(l *ratelimit.Limit, k kind, now int64) state {
	if k == kBox {
		return state{k: k, idx: none, c: newCell(l, now)}
	}
	s := state{k: k, idx: t.alloc()}
	t.at(s.idx).lim = l
	t.apply(&s, opInit, l, &args{now: now})
	return s
}
