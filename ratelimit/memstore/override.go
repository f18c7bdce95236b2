package memstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

var _ ratelimit.OverrideTable = (*Store)(nil)

// overrideTable is the memory store's override table: this process's
// alone, under its own lock (never a shard's).
type overrideTable struct {
	mu      sync.Mutex
	version uint64
	m       map[overrideID]ratelimit.Override
}

type overrideID struct{ limit, subject string }

// PutOverride implements ratelimit.OverrideTable.
func (s *Store) PutOverride(_ context.Context, now time.Time, o ratelimit.Override, max int) error {
	t := &s.overrides
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	for id, old := range t.m {
		if !now.Before(old.Expires) {
			delete(t.m, id)
			changed = true
		}
	}
	id := overrideID{o.Limit, o.Subject}
	if _, ok := t.m[id]; !ok && len(t.m) >= max {
		if changed {
			t.version++
		}
		return ratelimit.ErrTooManyOverrides
	}
	if t.m == nil {
		t.m = make(map[overrideID]ratelimit.Override)
	}
	o.Rates = slices.Clone(o.Rates)
	t.m[id] = o
	t.version++
	return nil
}

// DeleteOverride implements ratelimit.OverrideTable.
func (s *Store) DeleteOverride(_ context.Context, limit, subject string) (bool, error) {
	t := &s.overrides
	t.mu.Lock()
	defer t.mu.Unlock()
	id := overrideID{limit, subject}
	if _, ok := t.m[id]; !ok {
		return false, nil
	}
	delete(t.m, id)
	t.version++
	return true, nil
}

// Overrides implements ratelimit.OverrideTable. The version starts at 1,
// so known = 0 always reads the table.
func (s *Store) Overrides(_ context.Context, known uint64) (uint64, []ratelimit.Override, error) {
	t := &s.overrides
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.version + 1
	if v == known {
		return v, nil, nil
	}
	list := make([]ratelimit.Override, 0, len(t.m))
	for _, o := range t.m {
		o.Rates = slices.Clone(o.Rates)
		list = append(list, o)
	}
	return v, list, nil
}
