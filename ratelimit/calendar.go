package ratelimit

import (
	"fmt"
	"time"
	// The quota algorithm's periods follow a zone's calendar; embedding
	// the zone database (about 450 kB) makes them work on hosts and
	// images that ship none, such as scratch or distroless containers.
	_ "time/tzdata"
)

// Period is a calendar period of the quota algorithm. The zero value is
// no period: a rate of every other algorithm counts in a uniform window.
type Period uint8

// The periods. Each starts at local midnight in the limit's Location:
// every day, every Monday (ISO weeks), or on the limit's MonthStartsOn day
// of every month.
const (
	PeriodDay Period = iota + 1
	PeriodWeek
	PeriodMonth
)

// MonthWindow is the window of the rate "N/month": the longest month, 31
// days. The quota algorithm reads the windows of "N/day" (24 hours),
// "N/week" (7 days) and "N/month" as calendar periods, whose real length
// varies (see Limit.PeriodAt); no other algorithm should be given a
// month (the configuration refuses it), which is not a uniform window.
const MonthWindow = 31 * dayWindow

const (
	dayWindow   = 24 * time.Hour
	weekWindow  = 7 * dayWindow
	monthWindow = MonthWindow
)

var periodNames = [...]string{PeriodDay: "day", PeriodWeek: "week", PeriodMonth: "month"}

// String returns the configuration name of p ("day", "week", "month").
func (p Period) String() string {
	if p == 0 || int(p) >= len(periodNames) {
		return fmt.Sprintf("Period(%d)", int(p))
	}
	return periodNames[p]
}

// periodOf returns the calendar period a quota rate counts in: day for a
// 24-hour window, week for 7 days, month for 31 days; 0 for any other
// window.
func periodOf(r Rate) Period {
	switch r.Window {
	case dayWindow:
		return PeriodDay
	case weekWindow:
		return PeriodWeek
	case monthWindow:
		return PeriodMonth
	}
	return 0
}

// PeriodOf returns the calendar period of window i of a Quota limit, 0
// for other algorithms.
func (l *Limit) PeriodOf(i int) Period { return l.calendar(i).Period }

// Calendar is where a quota's periods begin: a period kind, the zone whose
// wall clock says where days begin, and the day of the month on which
// monthly periods begin.
type Calendar struct {
	Period   Period
	Location *time.Location
	// StartDay is the day of the month (1..28) a monthly period starts on.
	StartDay int
}

// date is a calendar date in the proleptic Gregorian calendar, normalised
// by time.Date's rules (day 32 of January is February 1).
type date struct{ y, m, d int }

func (d date) add(days int) date {
	t := time.Date(d.y, time.Month(d.m), d.d+days, 0, 0, 0, 0, time.UTC)
	return date{t.Year(), int(t.Month()), t.Day()}
}

// wall returns the seconds since the epoch of the date's midnight read as
// if the wall clock were UTC.
func (d date) wall() int64 {
	return time.Date(d.y, time.Month(d.m), d.d, 0, 0, 0, 0, time.UTC).Unix()
}

// first returns the key date of the period that local date d belongs to:
// d itself for days, the Monday on or before d for weeks, the StartDay on
// or before d for months.
func (c Calendar) first(d date) date {
	switch c.Period {
	case PeriodWeek:
		wd := int(time.Date(d.y, time.Month(d.m), d.d, 0, 0, 0, 0, time.UTC).Weekday())
		return d.add(-((wd + 6) % 7)) // Monday = 0
	case PeriodMonth:
		if d.d >= c.StartDay {
			return date{d.y, d.m, c.StartDay}
		}
		return date{d.y, d.m - 1, c.StartDay}.add(0)
	}
	return d
}

// next returns the key date of the period after the one starting on d.
func (c Calendar) next(d date) date {
	switch c.Period {
	case PeriodWeek:
		return d.add(7)
	case PeriodMonth:
		return date{d.y, d.m + 1, d.d}.add(0)
	}
	return d.add(1)
}

// prev returns the key date of the period before the one starting on d.
func (c Calendar) prev(d date) date {
	switch c.Period {
	case PeriodWeek:
		return d.add(-7)
	case PeriodMonth:
		return date{d.y, d.m - 1, d.d}.add(0)
	}
	return d.add(-1)
}

// firstAt returns the first instant, in seconds since the epoch, at which
// the wall clock of loc reads the midnight starting date d or later. It
// walks the zone's segments (spans of one UTC offset) from well before
// that midnight: the answer is in the first segment whose wall clock gets
// there, at the midnight itself or, when a change of offset skipped it
// (a DST gap at midnight, or a whole skipped day), at the segment's start.
// A midnight that occurs twice (the clock set back across it) counts from
// its first occurrence.
func firstAt(d date, loc *time.Location) int64 {
	m := d.wall()
	// UTC offsets lie within ±26 hours: starting two days early is before
	// any instant whose wall clock reads m.
	x := m - 2*86400
	for range 64 { // a zone changes offset a few times a year at most
		t := time.Unix(x, 0).In(loc)
		_, off := t.Zone()
		start, end := t.ZoneBounds()
		o := int64(off)
		a := x // the segment's start, or x for the one x falls in
		if !start.IsZero() && start.Unix() > a {
			a = start.Unix()
		}
		if end.IsZero() || end.Unix()+o > m {
			// Some instant of [a, end) reads m or later.
			return max(a, m-o)
		}
		x = end.Unix()
	}
	return m // unreachable with real zone data
}

// Bounds returns the period containing the instant now (ticks since the
// epoch): its start and end in ticks. Periods are delimited by the first
// instant at which the local calendar reaches each period's first day, so
// they tile time without gaps or overlaps even across DST changes, days a
// zone skipped, and wall clocks set back across midnight (which do not
// reopen the day before). A period whose day was skipped entirely is
// empty.
func (c Calendar) Bounds(now int64) (start, end int64) {
	sec := floorDivTicks(now)
	lt := time.Unix(sec, 0).In(c.Location)
	k := c.first(date{lt.Year(), int(lt.Month()), lt.Day()})
	s, e := firstAt(k, c.Location), firstAt(c.next(k), c.Location)
	for e <= sec { // the wall clock was set back across a period's start
		k = c.next(k)
		s, e = e, firstAt(c.next(k), c.Location)
	}
	for s > sec { // defensive: the zone's data is not monotone
		k = c.prev(k)
		s, e = firstAt(k, c.Location), s
	}
	return s * tps, e * tps
}

// Around returns the boundaries of the periods around now, in ticks: the
// start of the previous period, the current period's start and end (the
// next one's start), and the next one's end. A store that decides by its
// own clock picks among them: its clock may be a little ahead of or
// behind the caller's.
func (c Calendar) Around(now int64) [4]int64 {
	s, e := c.Bounds(now)
	ps, _ := c.Bounds(s - 1)
	_, ne := c.Bounds(e)
	return [4]int64{ps, s, e, ne}
}

// tps is ticks per second.
const tps = int64(time.Second / Tick)

// floorDivTicks returns floor(t / tps).
func floorDivTicks(t int64) int64 {
	q := t / tps
	if t%tps != 0 && t < 0 {
		q--
	}
	return q
}
