package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestCompileOverrides: a stored override applies while its limit exists
// with the key parts it was made for and its numbers fit; otherwise it is
// listed with the reason and applies nowhere. Expiry is judged at Find.
func TestCompileOverrides(t *testing.T) {
	p, err := Compile(base(), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limit("per-client")
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rates := func(ss ...string) []ratelimit.Rate {
		var rs []ratelimit.Rate
		for _, s := range ss {
			r, err := ratelimit.ParseRate(s)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		return rs
	}
	// The limit's windows (1s and 1m) with other counts: the same ID.
	ok := ratelimit.Override{Limit: "per-client", Subject: "key:K", Scope: l.Scope, Rates: rates("50/s", "3000/m"), Expires: exp}
	gone, moved, unfit, nobody := ok, ok, ok, ok
	gone.Limit = "removed"
	moved.Scope = "by=ip;missing=0"
	unfit.Rates, unfit.MaxInFlight = nil, 3
	nobody.Subject = "consumer:nobody"
	o := p.CompileOverrides([]ratelimit.Override{ok, gone, moved, unfit, nobody})
	want := []string{"", "no limit of that name", "key parts changed", "numbers no longer fit", "no consumer of that name"}
	for i, st := range o.All {
		if (want[i] == "") != (st.Problem == "") || !strings.Contains(st.Problem, want[i]) {
			t.Errorf("override %d: problem %q, want %q", i, st.Problem, want[i])
		}
	}
	lo := o.For(l)
	if lo == nil || !lo.NeedsSubject() {
		t.Fatal("the valid override is not compiled")
	}
	if ov := lo.Find(exp.Add(-time.Microsecond), "", "K"); ov == nil || ov.Limit.Rates[0].Limit != 50 || ov.Limit.ID != l.ID {
		t.Errorf("Find before expiry: %+v, want 50/s with the limit's ID", ov)
	}
	if ov := lo.Find(exp, "", "K"); ov != nil {
		t.Errorf("Find at expiry: %+v, want none", ov)
	}
	if ov := lo.Find(exp.Add(-time.Hour), "", "other"); ov != nil {
		t.Errorf("Find for another subject: %+v", ov)
	}
	other := p.CompileOverrides([]ratelimit.Override{{Limit: "per-client", Subject: "key:K", Scope: l.Scope, Rates: rates("50/s"), Expires: exp}})
	if ov := other.For(l).Find(exp.Add(-time.Hour), "", "K"); ov == nil || ov.Limit.ID == l.ID {
		t.Errorf("an override with other windows: %+v, want its own ID (its own counters)", ov)
	}
	if o.For(p.Limit("search")) != nil {
		t.Error("a limit without overrides has some")
	}
}
