package override_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// flaky is an override table that fails while down is set.
type flaky struct {
	ratelimit.OverrideTable
	down bool
}

func (f *flaky) Overrides(ctx context.Context, known uint64) (uint64, []ratelimit.Override, error) {
	if f.down {
		return 0, nil, errors.New("table unreachable")
	}
	return f.OverrideTable.Overrides(ctx, known)
}

func testPolicy(t *testing.T) *policy.Policy {
	return policytest.Compile(t, func(c *config.Config) {
		l := config.DefaultLimit()
		l.Name, l.Rates = "per-client", []string{"5/1m"}
		c.Limits = []config.LimitConfig{l}
		rt := config.DefaultRoute()
		rt.Name, rt.Limits, rt.Respond = "demo", []string{"per-client"}, &config.RespondConfig{Body: "ok"}
		c.Routes = []config.RouteConfig{rt}
	})
}

// TestSync: a Sync sees the table only when it reads it, compiles once
// per table version and policy, reports each change once, and keeps the
// overrides it read while the table cannot be read.
func TestSync(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	table := &flaky{OverrideTable: store}
	changes := 0
	s := override.New(table, override.Options{Changed: func() { changes++ }})
	p := testPolicy(t)
	if s.For(p) != nil {
		t.Fatal("an unread table has overrides")
	}
	l := p.Limit("per-client")
	rec := ratelimit.Override{Limit: "per-client", Subject: "key:{a}b", Scope: l.Scope,
		Rates: []ratelimit.Rate{{Limit: 9, Window: time.Minute}}, Expires: time.Now().Add(time.Hour)}
	if err := store.PutOverride(ctx, time.Now(), rec, 10); err != nil {
		t.Fatal(err)
	}
	if s.For(p) != nil {
		t.Fatal("the override applies before the table was read")
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	first := s.For(p)
	if first == nil || first.For(l) == nil || changes != 1 {
		t.Fatalf("after a read: %+v, %d changes; want the override and 1 change", first, changes)
	}
	if err := s.Refresh(ctx); err != nil || s.For(p) != first || changes != 1 {
		t.Fatalf("an unchanged table: err %v, recompiled %v, %d changes", err, s.For(p) != first, changes)
	}
	p2 := testPolicy(t)
	if c := s.For(p2); c == first || c.For(p2.Limit("per-client")) == nil {
		t.Fatalf("a new policy: compilation %p (old %p)", c, first)
	}
	table.down = true
	if _, err := store.DeleteOverride(ctx, "per-client", "key:{a}b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err == nil {
		t.Fatal("Refresh of an unreadable table succeeded")
	}
	if s.For(p2) == nil {
		t.Fatal("the overrides read before were dropped while the table was unreadable")
	}
	table.down = false
	if err := s.Refresh(ctx); err != nil || s.For(p2) != nil || changes != 2 {
		t.Fatalf("after the delete was read: err %v, overrides %v, %d changes", err, s.For(p2), changes)
	}
}
