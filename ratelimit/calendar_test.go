package ratelimit

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The calendar's periods against hand-computed instants and against a
// naive model that scans the zone's wall clock minute by minute.

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func TestCalendarBoundsTable(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name       string
		zone       string
		period     Period
		startDay   int
		at         string
		start, end string // UTC
	}{
		{"spring-forward day is 23 hours", "America/New_York", PeriodDay, 1, "2024-03-10T12:00:00Z", "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z"},
		{"fall-back day is 25 hours", "America/New_York", PeriodDay, 1, "2024-11-03T12:00:00Z", "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z"},
		{"just before local midnight", "America/New_York", PeriodDay, 1, "2024-01-31T04:59:59Z", "2024-01-30T05:00:00Z", "2024-01-31T05:00:00Z"},
		{"at local midnight", "America/New_York", PeriodDay, 1, "2024-01-31T05:00:00Z", "2024-01-31T05:00:00Z", "2024-02-01T05:00:00Z"},
		{"leap February", "UTC", PeriodMonth, 1, "2024-02-29T23:59:59Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"common February", "UTC", PeriodMonth, 1, "2023-02-14T00:00:00Z", "2023-02-01T00:00:00Z", "2023-03-01T00:00:00Z"},
		{"December to January", "Asia/Tokyo", PeriodMonth, 1, "2023-12-31T15:00:00Z", "2023-12-31T15:00:00Z", "2024-01-31T15:00:00Z"},
		{"billing day 15, before it", "Europe/Berlin", PeriodMonth, 15, "2024-03-10T00:00:00Z", "2024-02-14T23:00:00Z", "2024-03-14T23:00:00Z"},
		{"billing day 28 across DST", "Europe/Berlin", PeriodMonth, 28, "2024-04-01T00:00:00Z", "2024-03-27T23:00:00Z", "2024-04-27T22:00:00Z"},
		{"billing day 28 in January", "UTC", PeriodMonth, 28, "2024-01-27T23:59:59Z", "2023-12-28T00:00:00Z", "2024-01-28T00:00:00Z"},
		{"ISO week starts Monday", "UTC", PeriodWeek, 1, "2024-01-07T23:59:59Z", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z"},
		{"week across year end", "UTC", PeriodWeek, 1, "2025-01-01T00:00:00Z", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z"},
		{"week with a DST change", "Europe/London", PeriodWeek, 1, "2024-03-31T12:00:00Z", "2024-03-25T00:00:00Z", "2024-03-31T23:00:00Z"},
		// Midnight skipped by DST: the day starts at 01:00 (-02).
		{"midnight in a DST gap", "America/Sao_Paulo", PeriodDay, 1, "2018-11-04T12:00:00Z", "2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z"},
		// Samoa skipped 30 December 2011: the 29th runs until the 31st.
		{"day skipped by the zone", "Pacific/Apia", PeriodDay, 1, "2011-12-30T09:59:59Z", "2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z"},
		{"day after the skipped day", "Pacific/Apia", PeriodDay, 1, "2011-12-30T10:00:00Z", "2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z"},
		{"half-hour zone", "Asia/Kolkata", PeriodDay, 1, "2024-06-01T18:29:59Z", "2024-05-31T18:30:00Z", "2024-06-01T18:30:00Z"},
		{"half-hour DST", "Australia/Lord_Howe", PeriodDay, 1, "2024-04-07T06:00:00Z", "2024-04-06T13:00:00Z", "2024-04-07T13:30:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Calendar{Period: tc.period, Location: mustZone(t, tc.zone), StartDay: tc.startDay}
			s, e := c.Bounds(utc(tc.at).UnixMicro())
			if ws, we := utc(tc.start).UnixMicro(), utc(tc.end).UnixMicro(); s != ws || e != we {
				t.Errorf("Bounds(%s) = [%s, %s), want [%s, %s)", tc.at,
					time.UnixMicro(s).UTC().Format(time.RFC3339), time.UnixMicro(e).UTC().Format(time.RFC3339), tc.start, tc.end)
			}
		})
	}
}

// naiveKey is the first day of the period that the wall clock of instant
// u (seconds) is in, as yyyymmdd: written from the definitions (a day; the
// Monday on or before; the billing day on or before), with none of the
// calendar code's helpers.
func naiveKey(c Calendar, u int64) int {
	lt := time.Unix(u, 0).In(c.Location)
	y, m, d := lt.Date()
	switch c.Period {
	case PeriodWeek:
		day := time.Date(y, m, d, 12, 0, 0, 0, time.UTC)
		for day.Weekday() != time.Monday {
			day = day.Add(-24 * time.Hour)
		}
		y, m, d = day.Date()
	case PeriodMonth:
		if d < c.StartDay {
			m--
			if m == 0 {
				m, y = 12, y-1
			}
		}
		d = c.StartDay
	}
	return y*10000 + int(m)*100 + d
}

// naiveBounds scans minutes from well before u to well after it, keeping
// the highest period key reached so far (a wall clock set back does not
// reopen a period), and returns the interval, refined to the second, over
// which that running maximum equals its value at u.
func naiveBounds(c Calendar, u int64, span int64) (start, end int64) {
	from := (u-span)/60*60 - 60
	run := naiveKey(c, from)
	target := 0
	start, end = -1, -1
	for m := from + 60; m <= u+span; m += 60 {
		if k := naiveKey(c, m); k > run {
			// The running maximum rises within (m−60, m]: find the second.
			s := m - 59
			for naiveKey(c, s) <= run {
				s++
			}
			if s > u && start >= 0 {
				return start, s
			}
			run = naiveKey(c, s)
			if s <= u {
				start = s
			}
			// Keys reached later inside the minute are caught next minute.
		}
		if m >= u && target == 0 {
			target = run
		}
	}
	return start, end
}

func TestCalendarBoundsNaive(t *testing.T) {
	zones := []string{"UTC", "America/New_York", "Europe/London", "Europe/Dublin", "Australia/Lord_Howe",
		"America/Sao_Paulo", "America/Havana", "Asia/Beirut", "America/Santiago", "Pacific/Apia",
		"Asia/Kolkata", "Pacific/Chatham", "America/St_Johns", "Antarctica/Troll", "Africa/Casablanca",
		"Asia/Tehran", "Pacific/Kiritimati"}
	rng := rand.New(rand.NewPCG(12, 2026))
	lo := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for _, z := range zones {
		loc := mustZone(t, z)
		for _, tc := range []struct {
			c    Calendar
			n    int
			span int64
		}{
			{Calendar{PeriodDay, loc, 1}, 40, 3 * 86400},
			{Calendar{PeriodWeek, loc, 1}, 6, 9 * 86400},
			{Calendar{PeriodMonth, loc, 1 + rng.IntN(28)}, 3, 33 * 86400},
		} {
			for range tc.n {
				u := lo + rng.Int64N(hi-lo)
				if rng.IntN(3) == 0 {
					// Near a zone change, where the periods are unusual.
					_, end := time.Unix(u, 0).In(loc).ZoneBounds()
					if !end.IsZero() {
						u = end.Unix() - 3600 + rng.Int64N(7200)
					}
				}
				ws, we := naiveBounds(tc.c, u, tc.span)
				s, e := tc.c.Bounds(u * tps)
				if s != ws*tps || e != we*tps {
					t.Errorf("%s %s start day %d at %s: Bounds = [%s, %s), naive [%s, %s)", z, tc.c.Period, tc.c.StartDay,
						time.Unix(u, 0).In(loc), time.UnixMicro(s).In(loc), time.UnixMicro(e).In(loc),
						time.Unix(ws, 0).In(loc), time.Unix(we, 0).In(loc))
				}
			}
		}
	}
}

// TestCalendarBoundsTile: consecutive periods meet, each contains the
// instants it was asked for, and Around lists the neighbours.
func TestCalendarBoundsTile(t *testing.T) {
	for _, z := range []string{"America/New_York", "Pacific/Apia", "America/Sao_Paulo", "Asia/Beirut"} {
		c := Calendar{Period: PeriodDay, Location: mustZone(t, z), StartDay: 1}
		u := time.Date(2011, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		s, e := c.Bounds(u)
		for range 3000 {
			if !(s <= u && u < e) {
				t.Fatalf("%s: Bounds(%d) = [%d, %d) does not contain it", z, u, s, e)
			}
			a := c.Around(u)
			if ps, _ := c.Bounds(s - 1); a != [4]int64{ps, s, e, a[3]} || a[3] <= e {
				t.Fatalf("%s: Around = %v, bounds [%d, %d)", z, a, s, e)
			}
			ns, ne := c.Bounds(e)
			if ns != e {
				t.Fatalf("%s: period after [%d, %d) starts at %d", z, s, e, ns)
			}
			s, e, u = ns, ne, ne-1
		}
	}
}

// BenchmarkCalendarBounds: the cost of finding a period, paid by the
// memory store once per period and key (the state keeps its bounds) and
// by the Redis store once per period and limit (the packed bounds are
// cached until the period ends).
func BenchmarkCalendarBounds(b *testing.B) {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []Period{PeriodDay, PeriodMonth} {
		b.Run(p.String(), func(b *testing.B) {
			c := Calendar{Period: p, Location: loc, StartDay: 1}
			t := time.Date(2024, 3, 10, 12, 0, 0, 0, loc).UnixMicro()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.Bounds(t + int64(i%1000)*3_600_000_000)
			}
		})
	}
}
