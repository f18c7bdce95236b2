package ratelimit

import (
	"cmp"
	"slices"
)

// WithRates returns a Finished copy of l (which must be Finished) that
// counts by rates instead of l.Rates: the variant of a limit that a plan
// or a consumer of its own gets. Everything else is l's, so when the
// windows are l's the variant has l's ID and shares its counters: a
// client whose rates change (a new plan) keeps what it has used.
func (l *Limit) WithRates(rates []Rate) (*Limit, error) {
	v := *l
	v.Rates = alignRates(l.Rates, rates)
	v.params = nil // Finish fills its own; l's are shared by l's requests
	v.ID = ""
	if err := v.Finish(); err != nil {
		return nil, err
	}
	return &v, nil
}

// alignRates returns a copy of rates in a canonical order: those whose
// window base has, in base's order, then the others by window length.
// The ID and the stored state follow the windows' order, so without this
// a plan or override listing the same windows in another order ("20/day",
// "400/month" against "100/month", "10/day") would count in other
// counters, and a client moved onto it would start afresh.
func alignRates(base, rates []Rate) []Rate {
	out := slices.Clone(rates)
	pos := func(r Rate) int {
		if i := slices.IndexFunc(base, func(b Rate) bool { return b.Window == r.Window }); i >= 0 {
			return i
		}
		return len(base)
	}
	slices.SortStableFunc(out, func(a, b Rate) int {
		if c := cmp.Compare(pos(a), pos(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.Window, b.Window)
	})
	return out
}
