package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

// validateCalendar checks the quota settings: a Quota limit counts per
// day, week or month, and only it takes a Location or a MonthStartsOn.
func (l *Limit) validateCalendar() error {
	if l.MonthStartsOn < 0 || l.MonthStartsOn > 28 {
		return fmt.Errorf("month_starts_on must be in 1..28 (every month has those days), got %d", l.MonthStartsOn)
	}
	if l.Algorithm != Quota {
		if l.Location != nil || l.MonthStartsOn != 0 {
			return errors.New("timezone and month_starts_on apply only to the quota algorithm")
		}
		return nil
	}
	seen := map[Period]bool{}
	for _, r := range l.Rates {
		p := periodOf(r)
		if p == 0 {
			return fmt.Errorf("rate %s: the quota algorithm counts per day, week or month, not per %s", r, r.Window)
		}
		if seen[p] {
			return fmt.Errorf("rate %s: two rates per %s", r, p)
		}
		seen[p] = true
	}
	return nil
}

// location returns the zone of l's calendar: Location, or UTC.
func (l *Limit) location() *time.Location {
	if l.Location == nil {
		return time.UTC
	}
	return l.Location
}

// monthStartsOn returns the day monthly periods begin on (default 1).
func (l *Limit) monthStartsOn() int {
	if l.MonthStartsOn == 0 {
		return 1
	}
	return l.MonthStartsOn
}

// calendar returns the Calendar of window i of a Quota limit (the zero
// Calendar for other algorithms).
func (l *Limit) calendar(i int) Calendar {
	if l.Algorithm != Quota || i >= len(l.Rates) {
		return Calendar{}
	}
	return Calendar{Period: periodOf(l.Rates[i]), Location: l.location(), StartDay: l.monthStartsOn()}
}

// PeriodAt returns the calendar period of window i of a Quota limit that
// contains now: its start and end. ok is false for other algorithms. The
// headers use it: the RateLimit-Policy window of a quota is its current
// period's length.
func (l *Limit) PeriodAt(i int, now time.Time) (start, end time.Time, ok bool) {
	c := l.calendar(i)
	if c.Period == 0 {
		return time.Time{}, time.Time{}, false
	}
	s, e := c.Bounds(now.UnixMicro())
	return time.UnixMicro(s), time.UnixMicro(e), true
}
