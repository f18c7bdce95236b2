package ratelimit

import (
	"testing"
	"time"
)

// TestQuotaVariant: a quota's variant with other numbers (a plan's
// rates, an override) keeps its zone, billing day, periods, counters
// (the ID) and penalty box, so the usage counted so far carries over.
func TestQuotaVariant(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	l := &Limit{Name: "monthly", Algorithm: Quota, Location: ny, MonthStartsOn: 15, Penalty: time.Hour,
		Rates: []Rate{{Limit: 100, Window: MonthWindow}, {Limit: 10, Window: 24 * time.Hour}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	v, err := l.WithNumbers([]Rate{{Limit: 5000, Window: MonthWindow}, {Limit: 500, Window: 24 * time.Hour}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != l.ID || v.PenaltyBox() == nil || v.PenaltyBox().ID != l.PenaltyBox().ID {
		t.Errorf("variant ID %q box %v; want the limit's %q and its box", v.ID, v.PenaltyBox(), l.ID)
	}
	at := time.Date(2024, 3, 20, 12, 0, 0, 0, ny)
	// Listed month first, kept day first (Finish sorts the rates).
	s, e, _ := v.PeriodAt(1, at)
	if want := time.Date(2024, 3, 15, 0, 0, 0, 0, ny); !s.Equal(want) || !e.Equal(time.Date(2024, 4, 15, 0, 0, 0, 0, ny)) {
		t.Errorf("variant's month: [%s, %s), want from %s to April 15", s, e, want)
	}
	if v.PeriodOf(0) != PeriodDay || v.Params(1).Limit != 5000 {
		t.Errorf("variant: period %s, limit %d", v.PeriodOf(0), v.Params(1).Limit)
	}
	if _, err := l.WithNumbers([]Rate{{Limit: 5, Window: time.Hour}}, 0, 0); err == nil {
		t.Error("a quota variant per hour was accepted")
	}
}
