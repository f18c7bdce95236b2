package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// zone loads an IANA zone for a quota.
func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// since returns the offset of instant at from the suite's epoch.
func since(at time.Time) time.Duration { return at.Sub(t0) }

// quota: a monthly quota in New York resets at local midnight of the 1st
// (05:00 UTC), not at UTC midnight; a clock stepped back into December
// does not reopen it.
func (s *suite) quota(t *testing.T) {
	st := s.store(t)
	l := limit(t, "q", ratelimit.Quota, "3/month")
	l.Location = zone(t, "America/New_York")
	finish(t, l)
	a := since(time.Date(2023, 12, 31, 23, 0, 0, 0, l.Location))
	day := 24 * time.Hour
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: a, Cost: 2, Want: ok(1, time.Hour)},
		{At: a + 30*time.Minute, Cost: 1, Want: ok(0, 30*time.Minute)},
		{At: a + time.Hour - time.Second, Cost: 1, Want: deny(0, time.Second, time.Second)},
		// Midnight of January 1 in New York: a new period of 31 days.
		{At: a + time.Hour, Cost: 3, Want: ok(0, 31*day)},
		{At: a + time.Hour + ms(1), Cost: 1, Want: deny(0, 31*day-ms(1), 31*day-ms(1))},
		{At: a, Cost: 1, Want: deny(0, 31*day+time.Hour, 31*day+time.Hour)},
		{At: a + time.Hour + 31*day, Cost: 1, Want: ok(2, 29*day)}, // February 2024: 29 days
	})
}

// quotaDayAndMonth: a day and a month (billing day 28) in Berlin across
// the spring DST change: March 31 lasts 23 hours.
func (s *suite) quotaDayAndMonth(t *testing.T) {
	st := s.store(t)
	l := limit(t, "q", ratelimit.Quota, "2/day", "4/month")
	l.Location, l.MonthStartsOn = zone(t, "Europe/Berlin"), 28
	finish(t, l)
	b := since(time.Date(2024, 3, 31, 0, 30, 0, 0, l.Location))
	nextDay := since(time.Date(2024, 4, 1, 0, 0, 0, 0, l.Location))
	monthEnd := since(time.Date(2024, 4, 28, 0, 0, 0, 0, l.Location))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: b, Cost: 1, Want: ok(1, 22*time.Hour+30*time.Minute)},
		{At: b + time.Minute, Cost: 1, Want: ok(0, 22*time.Hour+29*time.Minute)},
		{At: b + 2*time.Minute, Cost: 1, Want: deny(0, 22*time.Hour+28*time.Minute, 22*time.Hour+28*time.Minute)},
		{At: nextDay, Cost: 2, Want: ok(0, 24*time.Hour)},
		{At: nextDay + time.Hour, Cost: 1, Want: on(1, deny(0, monthEnd-nextDay-time.Hour, monthEnd-nextDay-time.Hour))},
	})
}

// decideOnce decides hits at now and compares the decisions (Lease
// aside) with want.
func decideOnce(t *testing.T, st ratelimit.Store, what string, now time.Time, hits []ratelimit.Hit, wantAllowed bool, want []ratelimit.Decision) {
	t.Helper()
	out := make([]ratelimit.Decision, len(hits))
	allowed, err := st.Decide(context.Background(), now, hits, out)
	if err != nil {
		t.Fatalf("%s: Decide: %v", what, err)
	}
	for i := range out {
		out[i].Lease = 0
	}
	if allowed != wantAllowed {
		t.Errorf("%s: allowed = %v, want %v (%+v)", what, allowed, wantAllowed, out)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("%s: hit %d = %+v, want %+v", what, i, out[i], want[i])
		}
	}
}

// penaltyLimit is a fixed window of 2 per second with a 10-second penalty.
func penaltyLimit(t *testing.T) *ratelimit.Limit {
	l := limit(t, "p", ratelimit.FixedWindow, "2/1s")
	l.Penalty = 10 * time.Second
	return finish(t, l)
}

// penalty: the denial that fills the box waits the penalty; every
// request in the box is denied for the time left, counting nothing, even
// after the window resets; the box is visible through Usage of
// PenaltyBox and removed by Reset of the limit.
func (s *suite) penalty(t *testing.T) {
	st := s.store(t)
	l := penaltyLimit(t)
	key := s.key(t, "k")
	hit := []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	penalized := func(left time.Duration) ratelimit.Decision {
		return ratelimit.Decision{Penalty: true, Limit: 2, RetryAfter: left, Reset: left}
	}
	decideOnce(t, st, "first", at(0), hit, true, []ratelimit.Decision{withLimit(2, ok(1, ms(1000)))})
	decideOnce(t, st, "second", at(ms(100)), hit, true, []ratelimit.Decision{withLimit(2, ok(0, ms(900)))})
	d := withLimit(2, deny(0, 10*time.Second, 10*time.Second))
	d.Penalty = true
	decideOnce(t, st, "denied: into the box", at(ms(200)), hit, false, []ratelimit.Decision{d})
	decideOnce(t, st, "new window, in the box", at(ms(1500)), hit, false, []ratelimit.Decision{penalized(ms(8700))})
	u, err := st.Usage(context.Background(), at(ms(1500)), l.PenaltyBox(), key)
	if err != nil || len(u) != 1 || u[0].Used != 1 || u[0].Reset != ms(8700) {
		t.Errorf("Usage of the penalty box = %+v, %v; want used 1, reset 8.7s", u, err)
	}
	decideOnce(t, st, "last tick in the box", at(ms(10200)-ratelimit.Tick), hit, false, []ratelimit.Decision{penalized(ratelimit.Tick)})
	// Nothing was counted in the box: the window of 10 s is fresh.
	decideOnce(t, st, "out of the box", at(ms(10200)), hit, true, []ratelimit.Decision{withLimit(2, ok(1, ms(800)))})
	decideOnce(t, st, "again", at(ms(10300)), hit, true, []ratelimit.Decision{withLimit(2, ok(0, ms(700)))})
	decideOnce(t, st, "denied again", at(ms(10400)), hit, false, []ratelimit.Decision{d})
	if err := st.Reset(context.Background(), l, key); err != nil {
		t.Fatal(err)
	}
	decideOnce(t, st, "after Reset", at(ms(10500)), hit, true, []ratelimit.Decision{withLimit(2, ok(1, ms(500)))})
}

// penaltyInLayer: a request in one limit's box is denied and counted
// nowhere, the other limits decided as usual; a limit that allowed a
// request another limit denied gets no penalty.
func (s *suite) penaltyInLayer(t *testing.T) {
	st := s.store(t)
	l := penaltyLimit(t)
	big := finish(t, limit(t, "big", ratelimit.TokenBucket, "100/1s"))
	one := finish(t, limit(t, "one", ratelimit.FixedWindow, "1/1s"))
	key := s.key(t, "k")
	hits := []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}, {Limit: big, Key: key, Cost: 1}}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// The other limit denies: l allowed, so no box.
	withOne := []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}, {Limit: one, Key: key, Cost: 1}}
	decideOnce(t, st, "both allow", at(0), withOne, true, []ratelimit.Decision{withLimit(2, ok(1, ms(1000))), withLimit(1, ok(0, ms(1000)))})
	decideOnce(t, st, "the other denies", at(ms(10)), withOne, false, []ratelimit.Decision{
		withLimit(2, ratelimit.Decision{Allowed: true, Remaining: 1, Reset: ms(990)}), withLimit(1, deny(0, ms(990), ms(990)))})
	decideOnce(t, st, "no penalty", at(ms(20)), hits, true, []ratelimit.Decision{withLimit(2, ok(0, ms(980))), withLimit(100, ok(99, ms(10)))})
	d := withLimit(2, deny(0, 10*time.Second, 10*time.Second))
	d.Penalty = true
	decideOnce(t, st, "into the box", at(ms(30)), hits, false, []ratelimit.Decision{d,
		withLimit(100, ratelimit.Decision{Allowed: true, Remaining: 100})})
	decideOnce(t, st, "in the box", at(ms(2030)), hits, false, []ratelimit.Decision{
		{Penalty: true, Limit: 2, RetryAfter: ms(8000), Reset: ms(8000)},
		withLimit(100, ratelimit.Decision{Allowed: true, Remaining: 100})})
	// The bucket counted nothing while the other limit was in the box.
	decideOnce(t, st, "bucket alone", at(ms(2040)), hits[1:], true, []ratelimit.Decision{withLimit(100, ok(99, ms(10)))})
}
