package usage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// held returns what the aggregate holds, "consumer/limit/period/start"
// (start in RFC 3339, UTC) to units.
func (e *Exporter) held() map[string]int64 {
	out := map[string]int64{}
	for i := range e.agg.s {
		sh := &e.agg.s[i]
		sh.mu.Lock()
		for k, en := range sh.m {
			out[fmt.Sprintf("%s/%s/%s/%s", k.consumer, k.limit, k.period, stamp(k.start))] += en.units
		}
		sh.mu.Unlock()
	}
	return out
}

// TestAdversaryObserve is the table of what a reviewer tried to make the
// export lose, double or misattribute, and what the aggregate holds
// afterwards. The expected periods are written out by hand (calendar
// dates), not computed by the code under test.
func TestAdversaryObserve(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	quota := func(tz *time.Location, startsOn int) *ratelimit.Limit {
		l := &ratelimit.Limit{Name: "tokens", Algorithm: ratelimit.Quota, Location: tz, MonthStartsOn: startsOn}
		r, err := ratelimit.ParseRate("1000/month")
		if err != nil {
			t.Fatal(err)
		}
		l.Rates = []ratelimit.Rate{r}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	fixed := limit(t, "calls", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Hour})
	conc := &ratelimit.Limit{Name: "inflight", Algorithm: ratelimit.Concurrency, MaxInFlight: 4}
	_ = conc.Finish()
	nyQuota := quota(ny, 0)
	nyQuota15 := quota(ny, 15)
	// 2025-03-01 04:59:59 UTC is still February 28 in New York.
	lateFeb := time.Date(2025, 3, 1, 4, 59, 59, 0, time.UTC)
	earlyMar := time.Date(2025, 3, 1, 5, 0, 1, 0, time.UTC)
	allowed := ratelimit.Decision{Allowed: true, Counted: true, Limit: 1000, Remaining: 900}
	for _, tc := range []struct {
		name string
		ev   proxy.Event
		want map[string]int64
	}{
		{"anonymous client (no consumer): not a billing key", proxy.Event{Start: lateFeb,
			Hits: []ratelimit.Hit{{Limit: fixed, Cost: 3}}, Decisions: []ratelimit.Decision{allowed}}, map[string]int64{}},
		{"denied request", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: fixed, Cost: 3}}, Decisions: []ratelimit.Decision{{Limit: 10}}}, map[string]int64{}},
		{"concurrency limit", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: conc, Cost: 1}}, Decisions: []ratelimit.Decision{allowed}}, map[string]int64{}},
		{"peek never answered (no Counted)", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: nyQuota, Cost: 5, Mode: ratelimit.HitPeek}}, Decisions: []ratelimit.Decision{{Allowed: true, Limit: 1000, Remaining: 1000}}},
			map[string]int64{}},
		{"quota in New York, a second before its midnight", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: nyQuota, Cost: 4}}, Decisions: []ratelimit.Decision{allowed}},
			map[string]int64{"acme/tokens/month/2025-02-01T05:00:00Z": 4}},
		{"quota in New York, a second after", proxy.Event{Start: earlyMar, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: nyQuota, Cost: 4}}, Decisions: []ratelimit.Decision{allowed}},
			map[string]int64{"acme/tokens/month/2025-03-01T05:00:00Z": 4}},
		{"month_starts_on 15, New York, March 15 04:30 UTC (still the 14th there)", proxy.Event{
			Start: time.Date(2025, 3, 15, 3, 30, 0, 0, time.UTC), Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: nyQuota15, Cost: 2}}, Decisions: []ratelimit.Decision{allowed}},
			map[string]int64{"acme/tokens/month/2025-02-15T05:00:00Z": 2}},
		{"the store's clock decided across the boundary (Decision.At)", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits:      []ratelimit.Hit{{Limit: nyQuota, Cost: 4}},
			Decisions: []ratelimit.Decision{{Allowed: true, Counted: true, Limit: 1000, Remaining: 900, At: earlyMar.UnixMicro()}}},
			map[string]int64{"acme/tokens/month/2025-03-01T05:00:00Z": 4}},
		{"counted by response after the boundary (CountedAt)", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits:      []ratelimit.Hit{{Limit: nyQuota, Cost: 1, Mode: ratelimit.HitPeek}},
			Decisions: []ratelimit.Decision{{Allowed: true, Limit: 1000, Remaining: 1000, At: lateFeb.UnixMicro()}},
			Counted:   []int64{40}, CountedAt: earlyMar},
			map[string]int64{"acme/tokens/month/2025-03-01T05:00:00Z": 40}},
		{"a request-counted hit beside a response-counted one keeps its own instant", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: fixed, Cost: 2}, {Limit: nyQuota, Cost: 1, Mode: ratelimit.HitPeek}},
			Decisions: []ratelimit.Decision{{Allowed: true, Counted: true, Limit: 10, Remaining: 8},
				{Allowed: true, Limit: 1000, Remaining: 1000}},
			Counted: []int64{2, 40}, CountedAt: earlyMar},
			map[string]int64{"acme/calls/1h0m0s/2025-03-01T04:00:00Z": 2, "acme/tokens/month/2025-03-01T05:00:00Z": 40}},
		{"a delay slot given back (Counted 0)", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits: []ratelimit.Hit{{Limit: fixed, Cost: 1}}, Decisions: []ratelimit.Decision{{Allowed: true, Counted: true, Limit: 10, Remaining: 9, Delay: time.Second}},
			Counted: []int64{0}}, map[string]int64{}},
		{"an upstream reporting a negative usage", proxy.Event{Start: lateFeb, Consumer: "acme",
			Hits:      []ratelimit.Hit{{Limit: nyQuota, Cost: 1, Mode: ratelimit.HitPeek}},
			Decisions: []ratelimit.Decision{{Allowed: true, Limit: 1000, Remaining: 1000}}, Counted: []int64{-40}, CountedAt: lateFeb},
			map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{Sink: "http://127.0.0.1:1/", FlushInterval: time.Hour, StopTimeout: time.Millisecond, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(t.Context())
			e.Observe(&tc.ev)
			e.Observe(&tc.ev) // twice: units add, never a second key
			got := e.held()
			for k, v := range tc.want {
				if got[k] != 2*v {
					t.Errorf("%s: %d units, want %d (all held: %v)", k, got[k], 2*v, got)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("held %v, want %v (twice)", got, tc.want)
			}
		})
	}
}

// TestNoticePerWindowNotIndex: a consumer on a plan of 10/hour crosses
// 0.8 in the hour from midnight, then moves to a plan of 100/day (other
// windows: a fresh counter) and crosses 0.8 of its day. Both windows are
// index 0 of their rates and both periods start at midnight, but they
// are two budgets: two notices (a key by window index made them one).
func TestNoticePerWindowNotIndex(t *testing.T) {
	rc := newReceiver(t)
	e, err := New(Options{Sink: rc.URL, FlushInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetNotify(map[string][]float64{"calls": {0.8}})
	hourly := limit(t, "calls", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Hour})
	daily := limit(t, "calls", ratelimit.FixedWindow, ratelimit.Rate{Limit: 100, Window: 24 * time.Hour})
	at := time.Date(2026, 5, 4, 0, 30, 0, 0, time.UTC)
	e.Observe(hitEvent("acme", hourly, at, 1, true, 2))                  // 8 of 10
	e.Observe(hitEvent("acme", daily, at.Add(time.Minute), 1, true, 20)) // 80 of 100
	if err := e.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ns := rc.notices()
	if len(ns) != 2 {
		t.Fatalf("%d notices %v, want one per window", len(ns), ns)
	}
}

// ttlClaims is a Claimer that records the ttl of every claim.
type ttlClaims struct {
	mu   sync.Mutex
	ttls []time.Duration
}

func (c *ttlClaims) Claim(_ context.Context, _, _ string, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ttls = append(c.ttls, ttl)
	return true, nil
}

// TestNoticeClaimTTLStoreClock: the store's clock (store.clock =
// "redis") decided a crossing at 10:15 of a 1h window; this gateway's
// own clock is years ahead of it. The claim must outlive the rest of
// the period as the store counts it (45 min): a ttl from the gateway's
// clock expired at once, and a second gateway crossing later in the
// same period found no claim and posted the notice again.
func TestNoticeClaimTTLStoreClock(t *testing.T) {
	rc := newReceiver(t)
	cl := &ttlClaims{}
	e, err := New(Options{Sink: rc.URL, FlushInterval: time.Hour, Claimer: cl, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetNotify(map[string][]float64{"calls": {0.5}})
	l := limit(t, "calls", ratelimit.FixedWindow, ratelimit.Rate{Limit: 10, Window: time.Hour})
	at := time.Date(2020, 1, 1, 10, 15, 0, 0, time.UTC)
	ev := hitEvent("acme", l, at, 1, true, 4)
	ev.Decisions[0].At = at.UnixMicro()
	e.Observe(ev)
	if err := e.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.ttls) != 1 || cl.ttls[0] < 45*time.Minute {
		t.Errorf("claim ttls %v, want one of at least the 45 min left in the store's period", cl.ttls)
	}
}

// TestNoticeResponseCountedAcrossPeriods: a consumer at 900 of its
// 1000/month (New York) sends a request decided on February 28 there
// and answered on March 1 with 40 units. March holds 40: no 0.8 notice
// for March (its usage was judged from February's window plus the 40).
func TestNoticeResponseCountedAcrossPeriods(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	e, err := New(Options{Sink: rc.URL, FlushInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.SetNotify(map[string][]float64{"tokens": {0.8}})
	r, err := ratelimit.ParseRate("1000/month")
	if err != nil {
		t.Fatal(err)
	}
	l := &ratelimit.Limit{Name: "tokens", Algorithm: ratelimit.Quota, Location: ny, Rates: []ratelimit.Rate{r}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	lateFeb := time.Date(2025, 3, 1, 4, 59, 59, 0, time.UTC)
	e.Observe(&proxy.Event{Start: lateFeb, Consumer: "acme",
		Hits:      []ratelimit.Hit{{Limit: l, Cost: 1, Mode: ratelimit.HitPeek}},
		Decisions: []ratelimit.Decision{{Allowed: true, Limit: 1000, Remaining: 100, At: lateFeb.UnixMicro()}},
		Counted:   []int64{40}, CountedAt: lateFeb.Add(2 * time.Second)})
	if err := e.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, n := range rc.notices() {
		if n["period_start"] == "2025-03-01T05:00:00Z" {
			t.Errorf("notice for March, which holds 40 of 1000: %v", n)
		}
	}
}
