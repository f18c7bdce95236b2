package override

import (
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// Table is the override table compiled against one policy: for each of
// its limits, the overrides that name it, as limits ready to decide. It
// is immutable and safe for concurrent use; a nil *Table holds none.
type Table struct {
	limits map[*policy.Limit]*LimitTable
	// All is every override of the table with what became of it, in the
	// table's order.
	All []Status
}

// Status is one override of the table and whether it applies under the
// policy (its expiry aside).
type Status struct {
	ratelimit.Override
	// Problem says why it does not apply: its limit is gone, the limit's
	// key parts changed since, or its numbers no longer fit the limit. ""
	// when it applies.
	Problem string
}

// LimitTable is the part of a Table for one limit: its overrides by
// consumer and by client key.
type LimitTable struct {
	// keyIsSubject is set when the limit is keyed by identity parts only,
	// so that a request's counter key is its subject.
	keyIsSubject bool
	consumers    map[string]*Compiled
	keys         map[string]*Compiled
}

// Compiled is one override compiled against the policy: the limit it
// makes of its limit, and its stored record.
type Compiled struct {
	// Limit is the limit under the override (Finished).
	Limit *ratelimit.Limit
	// Record is the override as stored.
	Record ratelimit.Override
}

// Compile compiles the stored overrides list against p. An override
// whose limit is gone, whose limit's key parts changed since it was made,
// or whose numbers no longer fit the limit does not apply (All says why).
func Compile(p *policy.Policy, list []ratelimit.Override) *Table {
	o := &Table{All: make([]Status, 0, len(list))}
	for _, rec := range list {
		st := Status{Override: rec}
		l := p.Limit(rec.Limit)
		switch {
		case l == nil:
			st.Problem = "no limit of that name is configured"
		case strings.HasPrefix(rec.Subject, "consumer:") && (p.Consumers.Registry == nil ||
			p.Consumers.Registry.ByName(strings.TrimPrefix(rec.Subject, "consumer:")) == nil):
			st.Problem = "no consumer of that name is registered"
		case rec.Scope != l.Scope && !strings.HasPrefix(rec.Subject, "consumer:"):
			st.Problem = "the limit's key parts changed since the override was made, so it names no counter; delete it and make it again"
		default:
			var rates []string
			for _, r := range rec.Rates {
				rates = append(rates, r.String())
			}
			v, errs := l.OverrideLimit(policy.OverrideNumbers{Rates: rates, Burst: rec.Burst, MaxInFlight: rec.MaxInFlight})
			if len(errs) > 0 {
				st.Problem = "its numbers no longer fit the limit: " + errs[0].Error()
				break
			}
			o.add(l, &Compiled{Limit: v, Record: rec})
		}
		o.All = append(o.All, st)
	}
	return o
}

func (o *Table) add(l *policy.Limit, ov *Compiled) {
	if o.limits == nil {
		o.limits = make(map[*policy.Limit]*LimitTable)
	}
	lo := o.limits[l]
	if lo == nil {
		lo = &LimitTable{keyIsSubject: len(policy.AppendIdentityParts(nil, l.By)) == len(l.By)}
		o.limits[l] = lo
	}
	if name, ok := strings.CutPrefix(ov.Record.Subject, "consumer:"); ok {
		if lo.consumers == nil {
			lo.consumers = make(map[string]*Compiled)
		}
		lo.consumers[name] = ov
	} else if key, ok := strings.CutPrefix(ov.Record.Subject, "key:"); ok {
		if lo.keys == nil {
			lo.keys = make(map[string]*Compiled)
		}
		lo.keys[key] = ov
	}
}

// For returns the overrides of l, or nil when it has none.
func (o *Table) For(l *policy.Limit) *LimitTable {
	if o == nil || o.limits == nil {
		return nil
	}
	return o.limits[l]
}

// Find returns the override in force at now (wall clock) for a request of
// the named consumer ("" for none) whose subject key is subject (see
// Subject), or nil. A consumer's override comes before one of its key.
func (lo *LimitTable) Find(now time.Time, consumer, subject string) *Compiled {
	if consumer != "" && lo.consumers != nil {
		if ov := lo.consumers[consumer]; ov != nil && now.Before(ov.Record.Expires) {
			return ov
		}
	}
	if subject != "" && lo.keys != nil {
		if ov := lo.keys[subject]; ov != nil && now.Before(ov.Record.Expires) {
			return ov
		}
	}
	return nil
}

// NeedsSubject reports whether Find needs a subject key: some override
// of the limit names a client by key.
func (lo *LimitTable) NeedsSubject() bool { return len(lo.keys) > 0 }

// Subject returns the subject key of a request whose key parts for the
// limit are parts and whose counter key is counterKey: the counter key
// itself when the limit is keyed by identity parts only (no hashing),
// else the key of parts' identity parts.
func (lo *LimitTable) Subject(e *keys.Extractor, parts []keys.Part, counterKey string, id *keys.Identity) string {
	if lo.keyIsSubject {
		return counterKey
	}
	var buf [4]keys.Part
	ids := policy.AppendIdentityParts(buf[:0], parts)
	if len(ids) == 0 {
		return ""
	}
	return string(e.AppendKey(nil, ids, id, &keys.Values{}))
}
