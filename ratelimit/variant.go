package ratelimit

import (
	"cmp"
	"slices"
)

// WithRates returns a Finished copy of l (which must be Finished) that
// counts by rates instead of l.Rates: the variant of a limit that a plan
// or a consumer of its own gets. Everything else is l's, so when the
// windows are l's the variant has l's ID and shares its counters: a
// client whose rates change (a new plan) keeps what it has used. Finish
// sorts the variant's rates as it sorted l's, so the order rates lists
// them in does not matter.
func (l *Limit) WithRates(rates []Rate) (*Limit, error) {
	v := *l
	v.Rates = rates // Finish sorts a copy: the caller's stay as they are
	v.ID = ""
	if err := v.Finish(); err != nil {
		return nil, err
	}
	return &v, nil
}

// sortedRates returns rates in their canonical order, by window, then by
// count, in a slice of its own (rates itself is left as it is). A limit's ID and the layout of its state follow the order of its
// windows, so without it a configuration that lists the same rates in
// another order ("100/month", "2/minute" against "2/minute", "100/month")
// would count in other counters, and a reload that only tidied the list
// would give every client a fresh quota.
func sortedRates(rates []Rate) []Rate {
	if rates == nil {
		return nil
	}
	out := slices.Clone(rates)
	slices.SortStableFunc(out, func(a, b Rate) int {
		if c := cmp.Compare(a.Window, b.Window); c != 0 {
			return c
		}
		return cmp.Compare(a.Limit, b.Limit)
	})
	return out
}
