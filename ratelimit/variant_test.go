package ratelimit

import (
	"testing"
	"time"
)

func TestWithRates(t *testing.T) {
	base := &Limit{Name: "per-consumer", Algorithm: GCRA, Rates: []Rate{{Limit: 2, Window: time.Second}}, Scope: "by=consumer"}
	if err := base.Finish(); err != nil {
		t.Fatal(err)
	}
	same, err := base.WithRates([]Rate{{Limit: 100, Window: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if same.ID != base.ID {
		t.Errorf("same windows: ID %q, want the base's %q (counters shared)", same.ID, base.ID)
	}
	if base.Rates[0].Limit != 2 || base.params[0].Limit != 2 {
		t.Errorf("base changed by its variant: rates %v, params %+v", base.Rates, base.params[0])
	}
	if same.params[0].Limit != 100 {
		t.Errorf("variant params %+v, want limit 100", same.params[0])
	}
	other, err := base.WithRates([]Rate{{Limit: 10, Window: time.Second}, {Limit: 1000, Window: 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == base.ID {
		t.Errorf("other windows share the base's ID %q: states of two layouts under one key", base.ID)
	}
	if _, err := base.WithRates(nil); err == nil {
		t.Error("no rates: want an error")
	}
}

// TestVariantRateOrder: a variant (plan, consumer, override) listing the
// base's windows in another order is the same counter as the base, its
// windows in canonical order (shortest first) like the base's, whatever
// order either lists them in, so that a client moved between them keeps
// its usage (before, the order was part of the ID: listing a plan's
// "20/day" before "400/month" gave its clients fresh quotas); variants
// with the same windows as each other but not the base agree too.
func TestVariantRateOrder(t *testing.T) {
	month, day := Rate{Limit: 100, Window: monthWindow}, Rate{Limit: 10, Window: dayWindow}
	base := &Limit{Name: "q", Algorithm: Quota, Rates: []Rate{month, day}, Scope: "by=consumer"}
	if err := base.Finish(); err != nil {
		t.Fatal(err)
	}
	rev, err := base.WithRates([]Rate{{Limit: 20, Window: dayWindow}, {Limit: 400, Window: monthWindow}})
	if err != nil {
		t.Fatal(err)
	}
	if rev.ID != base.ID || rev.Rates[0] != (Rate{Limit: 20, Window: dayWindow}) || rev.Rates[1] != (Rate{Limit: 400, Window: monthWindow}) {
		t.Errorf("plan listing day before month: ID %q rates %v; want the base's ID %q, day first", rev.ID, rev.Rates, base.ID)
	}
	ov, err := base.WithNumbers([]Rate{{Limit: 30, Window: dayWindow}, {Limit: 900, Window: monthWindow}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ov.ID != base.ID || ov.Rates[0].Window != dayWindow {
		t.Errorf("override listing day before month: ID %q rates %v; want the base's ID %q", ov.ID, ov.Rates, base.ID)
	}
	week := Rate{Limit: 50, Window: weekWindow}
	a, err := base.WithRates([]Rate{week, day})
	if err != nil {
		t.Fatal(err)
	}
	b, err := base.WithRates([]Rate{day, week})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID || a.ID == base.ID {
		t.Errorf("two variants with week and day: IDs %q and %q (base %q), want equal to each other only", a.ID, b.ID, base.ID)
	}
	if base.Rates[0] != day || base.Rates[1] != month {
		t.Errorf("base's rates %v, want day first (Finish sorts them) and unchanged by its variants", base.Rates)
	}
	plan := []Rate{month, day}
	if _, err := base.WithRates(plan); err != nil || plan[0] != month {
		t.Errorf("WithRates sorted its argument: %v, %v", plan, err)
	}
}

// TestFinishOwnsItsSlices: Finish leaves the rates it was given in their
// order, and finishing a copy of a finished limit with other rates
// changes neither the original's rates nor its windows' parameters.
func TestFinishOwnsItsSlices(t *testing.T) {
	given := []Rate{{Limit: 100, Window: time.Hour}, {Limit: 5, Window: time.Second}}
	l := &Limit{Name: "l", Algorithm: FixedWindow, Rates: given}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if given[0].Window != time.Hour || l.Rates[0].Window != time.Second {
		t.Fatalf("given %v, limit %v: want the given order kept and the limit's shortest first", given, l.Rates)
	}
	c := *l
	c.Rates = []Rate{{Limit: 7, Window: time.Minute}, {Limit: 1, Window: time.Second}}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if l.Rates[0] != (Rate{Limit: 5, Window: time.Second}) || l.Rates[1] != (Rate{Limit: 100, Window: time.Hour}) {
		t.Errorf("the original's rates became %v", l.Rates)
	}
	if p := l.ParamsOf(0); p.Limit != 5 || p.Window != int64(time.Second/Tick) {
		t.Errorf("the original's first window's params became %+v, want 5 per second", *p)
	}
	if p := l.ParamsOf(1); p.Limit != 100 || p.Window != int64(time.Hour/Tick) {
		t.Errorf("the original's second window's params became %+v, want 100 per hour", *p)
	}
}
