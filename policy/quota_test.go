package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// quotaConfig is base() with limits[0] a monthly quota in New York.
func quotaConfig() config.Config {
	c := base()
	c.Limits[0].Algorithm, c.Limits[0].Rates = "quota", []string{"100000/month", "5000/day"}
	c.Limits[0].Timezone, c.Limits[0].MonthStartsOn = "America/New_York", 15
	return c
}

// TestQuotaAndPenaltyHostileInputs: settings an operator (or a generated
// configuration) could get wrong or abuse — zones that are not zones or
// read files, billing days some months lack, months on uniform windows,
// penalties that never end or cannot apply — each refused with its field
// path; none panics or hangs.
func TestQuotaAndPenaltyHostileInputs(t *testing.T) {
	tests := []problemCase{
		{"unknown zone", func(c *config.Config) { c.Limits[0].Timezone = "Mars/Olympus_Mons" },
			[]string{`limits[0].timezone: unknown time zone "Mars/Olympus_Mons"`}},
		{"path in zone", func(c *config.Config) { c.Limits[0].Timezone = "../../../etc/passwd" },
			[]string{`limits[0].timezone: unknown time zone "../../../etc/passwd"`}},
		{"absolute path zone", func(c *config.Config) { c.Limits[0].Timezone = "/etc/localtime" },
			[]string{`limits[0].timezone: unknown time zone "/etc/localtime"`}},
		{"host zone", func(c *config.Config) { c.Limits[0].Timezone = "Local" },
			[]string{`limits[0].timezone: time zone "Local" means the host's zone`}},
		{"huge zone name", func(c *config.Config) { c.Limits[0].Timezone = strings.Repeat("A/", 5000) },
			[]string{`limits[0].timezone: unknown time zone`}},
		{"NUL in zone", func(c *config.Config) { c.Limits[0].Timezone = "UTC\x00" },
			[]string{`limits[0].timezone: unknown time zone`}},
		{"month_starts_on 29", func(c *config.Config) { c.Limits[0].MonthStartsOn = 29 },
			[]string{`limits[0].month_starts_on: must be in 1..28 (a day every month has), got 29`}},
		{"month_starts_on negative", func(c *config.Config) { c.Limits[0].MonthStartsOn = -1 },
			[]string{`limits[0].month_starts_on: must be in 1..28 (a day every month has), got -1`}},
		{"timezone on a fixed window", func(c *config.Config) {
			c.Limits[1].Timezone = "UTC"
		}, []string{`limits[1].timezone: applies only to algorithm "quota"`}},
		{"month_starts_on on a log", func(c *config.Config) { c.Limits[1].MonthStartsOn = 3 },
			[]string{`limits[1].month_starts_on: applies only to algorithm "quota"`}},
		{"month on a log", func(c *config.Config) { c.Limits[1].Rates = []string{"5/month"} },
			[]string{`limits[1].rates[0]: rate "5/month": a month is a calendar period, counted only by algorithm "quota"`}},
		{"quota per hour", func(c *config.Config) { c.Limits[0].Rates = []string{"5/hour"} },
			[]string{`limits[0]: rate 5/1h0m0s: the quota algorithm counts per day, week or month, not per 1h0m0s`}},
		{"quota with two monthly rates", func(c *config.Config) { c.Limits[0].Rates = []string{"5/month", "6/31d"} },
			[]string{`limits[0].rates[1]: window 744h0m0s appears twice`}},
		{"penalty on concurrency", func(c *config.Config) {
			c.Limits[1].Algorithm, c.Limits[1].Rates, c.Limits[1].MaxInFlight, c.Limits[1].Penalty = "concurrency", nil, 2, "1m"
		}, []string{`limits[1].penalty: does not apply to algorithm "concurrency"`}},
		{"penalty on shadow", func(c *config.Config) { c.Limits[1].Mode, c.Limits[1].Penalty = "shadow", "1m" },
			[]string{`limits[1].penalty: has no effect on a shadow limit`}},
		{"penalty on a batched limit", func(c *config.Config) {
			c.Limits[1].Algorithm, c.Limits[1].Sync, c.Limits[1].Penalty = "fixed_window", "batched", "1m"
		}, []string{`limits[1].penalty: cannot be combined with sync = "batched"`}},
		{"huge penalty", func(c *config.Config) { c.Limits[1].Penalty = "100000d" },
			[]string{`limits[1].penalty: invalid duration "100000d"`}},
		{"penalty past a year", func(c *config.Config) { c.Limits[1].Penalty = "367d" },
			[]string{`limits[1].penalty: invalid duration "367d"`}},
		{"penalty overflowing", func(c *config.Config) { c.Limits[1].Penalty = "9999999999h" },
			[]string{`limits[1].penalty: invalid duration "9999999999h"`}},
		{"negative penalty", func(c *config.Config) { c.Limits[1].Penalty = "-15m" },
			[]string{`limits[1].penalty: must be positive, got -15m`}},
		{"zero penalty", func(c *config.Config) { c.Limits[1].Penalty = "0s" },
			[]string{`limits[1].penalty: must be positive, got 0s`}},
		{"sub-microsecond penalty", func(c *config.Config) { c.Limits[1].Penalty = "1ns" },
			[]string{`limits[1]: penalty 1ns is not a whole number of microseconds`}},
	}
	testProblems(t, quotaConfig, tests)
}

// TestQuotaCompiles: a valid quota compiles to its zone and billing day, a
// penalty to its duration, and a memory store warns that quotas do not
// survive a restart (Redis does not).
func TestQuotaCompiles(t *testing.T) {
	c := quotaConfig()
	c.Limits[1].Penalty = "15m"
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Limits[0].Limit
	if q.Algorithm != ratelimit.Quota || q.Location.String() != "America/New_York" || q.MonthStartsOn != 15 {
		t.Errorf("quota compiled to %s in %v from day %d", q.Algorithm, q.Location, q.MonthStartsOn)
	}
	// Listed month first; compiled in canonical order, the day first.
	if q.PeriodOf(0) != ratelimit.PeriodDay || q.PeriodOf(1) != ratelimit.PeriodMonth {
		t.Errorf("periods %s, %s; want day, month", q.PeriodOf(0), q.PeriodOf(1))
	}
	if p.Limits[1].Penalty != 15*time.Minute || p.Limits[1].PenaltyBox() == nil {
		t.Errorf("penalty compiled to %s", p.Limits[1].Penalty)
	}
	warned := false
	for _, w := range p.Warnings {
		warned = warned || strings.Contains(w, `limits[0] ("per-client"): a quota on the memory store is lost when the gateway restarts`)
	}
	if !warned {
		t.Errorf("no memory-store quota warning in %q", p.Warnings)
	}
	c.Store.Backend = "redis"
	p, err = Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w, "quota") {
			t.Errorf("warning with the Redis store: %s", w)
		}
	}
	// A zone name changes the counters' identity (another zone's periods
	// are other periods); the billing day does too.
	c2 := quotaConfig()
	c2.Limits[0].Timezone = "Europe/Paris"
	p2, err := Compile(c2, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Limits[0].ID == p.Limits[0].ID {
		t.Error("a quota's ID does not change with its zone")
	}
}

// TestPenaltySharedMissingWarns: a penalty on a limit whose key has a
// part a client may leave out, with on_missing = "shared", is warned
// about with the limit's field path (every keyless client shares one
// counter, so a few keyless denials box them all); the other rows are
// not.
func TestPenaltySharedMissingWarns(t *testing.T) {
	for _, tc := range []struct {
		by        []string
		onMissing string
		penalty   string
		warn      bool
	}{
		{[]string{"api_key"}, "shared", "15m", true},
		{[]string{"user"}, "", "15m", true}, // shared is the default
		{[]string{"header:X-Tenant"}, "shared", "1h", true},
		{[]string{"route", "api_key"}, "shared", "15m", true},
		{[]string{"api_key"}, "ip", "15m", false},
		{[]string{"api_key"}, "reject", "15m", false},
		{[]string{"api_key"}, "shared", "", false},
		{[]string{"ip"}, "shared", "15m", false},
		{[]string{"client"}, "shared", "15m", false}, // a client always has an identity (its address at least)
		{[]string{}, "shared", "15m", false},         // one counter by design
	} {
		c := base()
		c.Limits[1].By, c.Limits[1].OnMissing, c.Limits[1].Penalty = tc.by, tc.onMissing, tc.penalty
		p, err := Compile(c, noEnv, os.ReadFile)
		if err != nil {
			t.Fatalf("by %v: %v", tc.by, err)
		}
		var got []string
		for _, w := range p.Warnings {
			if strings.Contains(w, "penalty") {
				got = append(got, w)
			}
		}
		if !tc.warn {
			if len(got) > 0 {
				t.Errorf("by %v, on_missing %q, penalty %q: unexpected warning %q", tc.by, tc.onMissing, tc.penalty, got)
			}
			continue
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], `limits[1].penalty ("search"): with on_missing = "shared"`) || !strings.Contains(got[0], "penalty box") {
			t.Errorf("by %v, on_missing %q: warnings %q; want one naming limits[1].penalty and on_missing", tc.by, tc.onMissing, p.Warnings)
		}
	}
}
