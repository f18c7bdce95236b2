package ratelimit

import (
	"errors"
	"fmt"
)

// validatePenalty checks Penalty: non-negative, a whole number of ticks
// no longer than MaxWindow, and not on a shadow limit.
func (l *Limit) validatePenalty() error {
	switch {
	case l.Penalty == 0:
		return nil
	case l.Penalty < 0:
		return fmt.Errorf("penalty must not be negative, got %s", l.Penalty)
	case l.Penalty > MaxWindow:
		return fmt.Errorf("penalty %s exceeds %s", l.Penalty, MaxWindow)
	case l.Penalty%Tick != 0:
		return fmt.Errorf("penalty %s is not a whole number of microseconds", l.Penalty)
	case l.Shadow:
		return errors.New("penalty has no effect on a shadow limit, which never denies")
	case l.Batch != nil:
		return errors.New("penalty cannot be combined with sync = \"batched\" (a batched limit decides from local leases, which see no penalty box)")
	}
	return nil
}

// PenaltySuffix ends the ID of a limit's penalty box: the box's ID is the
// limit's ID and this suffix, which no ID Finish computes contains.
const PenaltySuffix = "~penalty"

// newPenaltyBox returns the penalty box of l: a fixed_window_elastic
// limit of one unit per Penalty. A key's box is taken (one unit, its end
// set to now + Penalty) when l denies the key a request, and while it is
// full every request of the key is denied by l; so it is exactly "denied
// until the penalty ends", with the elastic window's math on every store.
func newPenaltyBox(l *Limit) *Limit {
	b := &Limit{Name: l.Name, Algorithm: FixedWindowElastic, Rates: []Rate{{Limit: 1, Window: l.Penalty}}, isBox: true}
	b.params = []Params{b.Params(0)}
	b.ID = l.ID + PenaltySuffix
	return b
}

// PenaltyBox returns the limit holding the penalties of l's keys (see
// newPenaltyBox), or nil when l has no penalty. Stores decide it beside
// l: a hit of l on a key whose box is full is denied with RetryAfter the
// time left in the box; a hit l denies fills the box.
func (l *Limit) PenaltyBox() *Limit { return l.penaltyBox }

// IsPenaltyBox reports whether l is another limit's penalty box (made by
// Finish, returned by PenaltyBox), so that a store can keep its states
// apart from ordinary counters: a box forgotten lets a client out early.
func (l *Limit) IsPenaltyBox() bool { return l.isBox }
