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
