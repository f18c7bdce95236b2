package ratelimit

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Override replaces the numbers of one limit for one subject until it
// expires: an operator's temporary deal ("Acme gets 1000/s until the end of
// the month") that every gateway sharing the store applies without a
// reload. Stores keep it as it is; the gateway gives Subject, Scope and
// Label their meaning.
type Override struct {
	// Limit is the name of the limit overridden.
	Limit string
	// Subject names whom the override applies to, opaque to stores: one
	// override per (Limit, Subject).
	Subject string
	// Scope is the limit's Scope when the override was made; once the
	// limit's Scope changes, its subjects name other counters and the
	// override no longer applies.
	Scope string
	// Rates replace the limit's rates (empty for Concurrency).
	Rates []Rate
	// Burst replaces the limit's burst (0: the rate's limit).
	Burst int64
	// MaxInFlight replaces a Concurrency limit's capacity.
	MaxInFlight int64
	// Expires is the wall-clock instant from which the override no longer
	// applies. A store may drop it from then on.
	Expires time.Time
	// Created is when the override was made.
	Created time.Time
	// Label is a readable name of the subject that holds no secret.
	Label string
	// Reason is the operator's note.
	Reason string
}

// OverrideTable is a store's table of overrides, shared by every gateway
// using the store (the memory store's table is this process's alone). It
// is small and bounded: the gateway reads it whole whenever its version
// changes. Implementations must be safe for concurrent use.
type OverrideTable interface {
	// PutOverride adds o, or replaces the override with o's Limit and
	// Subject. Overrides expired at now are dropped first; then, if the
	// table would hold more than max overrides, nothing changes and the
	// error is ErrTooManyOverrides.
	PutOverride(ctx context.Context, now time.Time, o Override, max int) error
	// DeleteOverride removes the override of limit and subject, reporting
	// whether there was one.
	DeleteOverride(ctx context.Context, limit, subject string) (bool, error)
	// Overrides returns the table's version and, when it differs from
	// known, every override it holds (expired ones included until they
	// are dropped), in no particular order. Every change makes a version
	// that was never returned before, and never 0, so known = 0 always
	// reads the table.
	Overrides(ctx context.Context, known uint64) (version uint64, list []Override, err error)
}

// ErrTooManyOverrides is the error of PutOverride on a full table.
var ErrTooManyOverrides = errors.New("too many overrides")

// WithNumbers returns a Finished copy of l with other numbers: rates,
// burst and max_in_flight (the rest, Name and Scope included, is l's).
// The copy keeps l's ID when its windows have l's lengths, so the counts
// carry between the two: an override or a plan judges the usage counted
// so far, as a reload that changes a limit's numbers does.
func (l *Limit) WithNumbers(rates []Rate, burst, maxInFlight int64) (*Limit, error) {
	v := *l
	v.Rates, v.Burst, v.MaxInFlight = slices.Clone(rates), burst, maxInFlight // Finish sorts the clone
	v.params, v.ID = nil, ""
	if err := v.Finish(); err != nil {
		return nil, err
	}
	return &v, nil
}
