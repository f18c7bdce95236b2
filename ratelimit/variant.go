package ratelimit

// WithRates returns a Finished copy of l (which must be Finished) that
// counts by rates instead of l.Rates: the variant of a limit that a plan
// or a consumer of its own gets. Everything else is l's, so when the
// windows are l's the variant has l's ID and shares its counters: a
// client whose rates change (a new plan) keeps what it has used.
func (l *Limit) WithRates(rates []Rate) (*Limit, error) {
	v := *l
	v.Rates = append([]Rate(nil), rates...)
	v.params = nil // Finish fills its own; l's are shared by l's requests
	v.ID = ""
	if err := v.Finish(); err != nil {
		return nil, err
	}
	return &v, nil
}
