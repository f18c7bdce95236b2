package headers_test

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/ratelimit"
)

// TestPolicyValueAtQuota: a quota's RateLimit-Policy window is its
// current period's length in its zone, hand-computed: a 23-hour DST day,
// a leap February, a 31-day month; other limits keep their window. The
// quota's periods are listed month first; the header, like every view of
// a limit's windows, shows them in canonical order, the day first.
func TestPolicyValueAtQuota(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	q := &ratelimit.Limit{Name: "monthly", Algorithm: ratelimit.Quota, Location: ny,
		Rates: []ratelimit.Rate{{Limit: 100000, Window: ratelimit.MonthWindow}, {Limit: 5000, Window: 24 * time.Hour}}}
	f := &ratelimit.Limit{Name: "f", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}}
	for _, l := range []*ratelimit.Limit{q, f} {
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	limits := []*ratelimit.Limit{q, f}
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2024, 3, 10, 12, 0, 0, 0, ny), `"monthly.day";q=5000;w=82800, "monthly.month";q=100000;w=2674800, "f";q=10;w=1`},
		{time.Date(2024, 2, 10, 12, 0, 0, 0, ny), `"monthly.day";q=5000;w=86400, "monthly.month";q=100000;w=2505600, "f";q=10;w=1`},
		{time.Date(2024, 11, 3, 12, 0, 0, 0, ny), `"monthly.day";q=5000;w=90000, "monthly.month";q=100000;w=2595600, "f";q=10;w=1`},
		{time.Time{}, `"monthly.day";q=5000;w=86400, "monthly.month";q=100000;w=2678400, "f";q=10;w=1`},
	} {
		if got := headers.PolicyValueAt(limits, tc.at); got != tc.want {
			t.Errorf("PolicyValueAt(%s) =\n %s\nwant\n %s", tc.at, got, tc.want)
		}
	}
}

// TestWindowsUnlistedWindow: a usage entry beyond the limit's rates (no
// store reports one) is described by the store's own rate instead of
// indexing past the limit's.
func TestWindowsUnlistedWindow(t *testing.T) {
	l := &ratelimit.Limit{Name: "f", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	got := headers.Windows(l, []ratelimit.WindowUsage{
		{Rate: l.Rates[0], Used: 1, Remaining: 9, Reset: time.Second},
		{Rate: ratelimit.Rate{Limit: 7, Window: time.Minute}, Used: 2, Remaining: 5, Reset: 30 * time.Second},
	}, time.Time{})
	want := []headers.Window{
		{Rate: "10/1s", Limit: 10, WindowSeconds: 1, Used: 1, Remaining: 9, ResetSeconds: 1},
		{Rate: "7/1m0s", Limit: 7, WindowSeconds: 60, Used: 2, Remaining: 5, ResetSeconds: 30},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Windows = %+v, want %+v", got, want)
	}
}
