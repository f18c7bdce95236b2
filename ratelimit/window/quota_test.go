package window

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// quotaKey is the first day of the calendar period that instant u (ticks)
// is in, as yyyymmdd, from the wall clock alone: the date; the Monday on or
// before it; the billing day on or before it.
func quotaKey(p ratelimit.Period, loc *time.Location, startDay int, u int64) int {
	y, m, d := time.UnixMicro(u).In(loc).Date()
	switch p {
	case ratelimit.PeriodWeek:
		day := time.Date(y, m, d, 12, 0, 0, 0, time.UTC)
		for day.Weekday() != time.Monday {
			day = day.AddDate(0, 0, -1)
		}
		y, m, d = day.Date()
	case ratelimit.PeriodMonth:
		if d < startDay {
			y, m = time.Date(y, m-1, 1, 0, 0, 0, 0, time.UTC).Year(), time.Date(y, m-1, 1, 0, 0, 0, 0, time.UTC).Month()
		}
		d = startDay
	}
	return y*10000 + int(m)*100 + d
}

// quotaModel is the naive quota: per window, the key of the latest period
// seen and the units counted in it. A clock that steps back keeps
// counting in the latest period.
type quotaModel struct {
	keys, counts []int
}

// checkQuota runs a random sequence of requests (steps of up to a day and
// a half, sometimes backwards, costs 1..4) through the engine with a
// quota of three windows (day, week, month) and compares every decision
// with the model, RetryAfter included: the first instant in a later
// period.
func checkQuota(t *testing.T, rng *rand.Rand, zone string) {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	startDay := 1 + rng.IntN(28)
	l := &ratelimit.Limit{Name: "q", Algorithm: ratelimit.Quota, Location: loc, MonthStartsOn: startDay,
		Rates: []ratelimit.Rate{{Limit: 3 + rng.Int64N(6), Window: 24 * time.Hour},
			{Limit: 10 + rng.Int64N(20), Window: 7 * 24 * time.Hour},
			{Limit: 30 + rng.Int64N(40), Window: ratelimit.MonthWindow}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	periods := []ratelimit.Period{ratelimit.PeriodDay, ratelimit.PeriodWeek, ratelimit.PeriodMonth}
	now := time.Date(2000+rng.IntN(40), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), 0, 0, 0, time.UTC).UnixMicro()
	states := make([]QuotaState, 3)
	Init(l, states, now)
	m := quotaModel{keys: make([]int, 3), counts: make([]int, 3)}
	for w := range 3 {
		m.keys[w] = quotaKey(periods[w], loc, startDay, now)
	}
	var d ratelimit.Decision
	for i := range 300 {
		step := rng.Int64N(int64(36 * time.Hour / ratelimit.Tick))
		if rng.IntN(8) == 0 {
			step = -rng.Int64N(int64(3 * time.Hour / ratelimit.Tick))
		}
		now += step
		cost := 1 + rng.Int64N(4)
		// A denial writes nothing, so only a counted request moves the
		// model to a later period.
		want := true
		keys, counts := append([]int(nil), m.keys...), append([]int(nil), m.counts...)
		for w := range 3 {
			if k := quotaKey(periods[w], loc, startDay, now); k > keys[w] {
				keys[w], counts[w] = k, 0
			}
			if int64(counts[w])+cost > l.Rates[w].Limit {
				want = false
			}
		}
		Check(l, states, now, cost, &d)
		if d.Allowed != want {
			t.Fatalf("%s step %d at %s cost %d: allowed %v, model %v (model counts %v, keys %v)",
				zone, i, time.UnixMicro(now).In(loc), cost, d.Allowed, want, counts, keys)
		}
		if !want && cost > l.Rates[0].Limit {
			if !d.Never {
				t.Fatalf("%s step %d: cost %d above the day's %d: Never not set", zone, i, cost, l.Rates[0].Limit)
			}
			continue
		}
		if !want {
			ra := int64(d.RetryAfter / ratelimit.Tick)
			k := keys[d.Window]
			if after := quotaKey(periods[d.Window], loc, startDay, now+ra); after <= k {
				t.Fatalf("%s step %d: RetryAfter %s lands in period %d, still %d", zone, i, d.RetryAfter, after, k)
			}
			if before := quotaKey(periods[d.Window], loc, startDay, now+ra-1); ra > 1 && before > k && step >= 0 {
				t.Fatalf("%s step %d: RetryAfter %s is late: the period after %d began by %s", zone, i, d.RetryAfter, k,
					time.UnixMicro(now+ra-1).In(loc))
			}
			continue
		}
		Take(l, states, now, cost)
		m.keys, m.counts = keys, counts
		for w := range 3 {
			m.counts[w] += int(cost)
		}
		Report(l, states, now, &d)
		if wantRem := l.Rates[d.Window].Limit - int64(m.counts[d.Window]); d.Remaining != wantRem {
			t.Fatalf("%s step %d: Remaining %d of window %d, model %d", zone, i, d.Remaining, d.Window, wantRem)
		}
	}
}

func TestQuotaAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	for _, zone := range []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
		"America/Sao_Paulo", "Pacific/Apia", "Asia/Kolkata", "America/St_Johns"} {
		for range 6 {
			checkQuota(t, rng, zone)
		}
	}
}

// FuzzQuota runs the model comparison from a fuzzed seed.
func FuzzQuota(f *testing.F) {
	f.Add(uint64(1), uint8(0)) // UTC
	f.Add(uint64(7), uint8(1)) // New York's DST days
	f.Add(uint64(9), uint8(4)) // São Paulo's midnight DST
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Apia"}
	f.Fuzz(func(t *testing.T, seed uint64, zone uint8) {
		checkQuota(t, rand.New(rand.NewPCG(seed, 1)), zones[int(zone)%len(zones)])
	})
}

// TestQuotaStateExpiry: a quota's state is fresh from its period's end,
// and a fresh state counts in the period of the instant it was made.
func TestQuotaStateExpiry(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	l := &ratelimit.Limit{Name: "q", Algorithm: ratelimit.Quota, Location: ny,
		Rates: []ratelimit.Rate{{Limit: 2, Window: ratelimit.MonthWindow}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	p := l.Params(0)
	at := time.Date(2024, 1, 31, 23, 59, 0, 0, ny).UnixMicro()
	var s QuotaState
	s.Init(&p, at)
	s.take(&p, at, 2)
	end := time.Date(2024, 2, 1, 0, 0, 0, 0, ny).UnixMicro()
	if got := s.Expiry(&p); got != end {
		t.Fatalf("Expiry = %s, want %s", time.UnixMicro(got).In(ny), time.UnixMicro(end).In(ny))
	}
	if ok, ra := s.allow(&p, at, 1); ok || ra != end-at {
		t.Fatalf("Allow at 23:59 = %v, %d; want denied until midnight (%d)", ok, ra, end-at)
	}
	if ok, _ := s.allow(&p, end, 2); !ok {
		t.Fatal("the quota did not reset at local midnight of the 1st")
	}
}
