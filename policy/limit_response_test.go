package policy

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
)

// TestValidateResponseAndDelay: every check of count, count_statuses,
// cost_response_header, on_limit, max_delay and max_waiting, with the
// exact problem line each must produce.
func TestValidateResponseAndDelay(t *testing.T) {
	bucket := func(c *config.Config) {
		c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].OnLimit, c.Limits[0].MaxDelay = "token_bucket", []string{"10/s"}, "delay", "1s"
	}
	tests := []problemCase{
		{"count value", func(c *config.Config) { c.Limits[0].Count = "reply" }, []string{`limits[0].count: unknown value "reply" (want request or response)`}},
		{"statuses without response", func(c *config.Config) { c.Limits[0].CountStatuses = []string{"401"} }, []string{`limits[0].count_statuses: applies only with count = "response"`}},
		{"header without response", func(c *config.Config) { c.Limits[0].CostResponseHeader = "X-Cost" }, []string{`limits[0].cost_response_header: applies only with count = "response"`}},
		{"response concurrency", func(c *config.Config) {
			c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].MaxInFlight, c.Limits[0].Count = "concurrency", nil, 2, "response"
		}, []string{`limits[0].count: count = "response" does not apply to concurrency`}},
		{"status text", func(c *config.Config) { c.Limits[0].Count, c.Limits[0].CountStatuses = "response", []string{"4xx"} }, []string{`limits[0].count_statuses[0]: invalid status "4xx"`}},
		{"status range order", func(c *config.Config) { c.Limits[0].Count, c.Limits[0].CountStatuses = "response", []string{"599-500"} }, []string{`limits[0].count_statuses[0]: status range "599-500" must lie within 100..599`}},
		{"status out of range", func(c *config.Config) {
			c.Limits[0].Count, c.Limits[0].CountStatuses = "response", []string{"401", "600"}
		}, []string{`limits[0].count_statuses[1]: status range "600" must lie within 100..599`}},
		{"status sign", func(c *config.Config) { c.Limits[0].Count, c.Limits[0].CountStatuses = "response", []string{"+401"} }, []string{`limits[0].count_statuses[0]: invalid status "+401"`}},
		{"status open range", func(c *config.Config) { c.Limits[0].Count, c.Limits[0].CountStatuses = "response", []string{"500-"} }, []string{`limits[0].count_statuses[0]: invalid status "500-"`}},
		{"response header name", func(c *config.Config) { c.Limits[0].Count, c.Limits[0].CostResponseHeader = "response", "X Cost" }, []string{`limits[0].cost_response_header: invalid header name "X Cost"`}},
		{"on_limit value", func(c *config.Config) { c.Limits[0].OnLimit = "queue" }, []string{`limits[0].on_limit: unknown value "queue" (want reject or delay)`}},
		{"max_delay without delay", func(c *config.Config) { c.Limits[0].MaxDelay = "1s" }, []string{`limits[0].max_delay: applies only with on_limit = "delay"`}},
		{"delay algorithm", func(c *config.Config) { c.Limits[0].OnLimit, c.Limits[0].MaxDelay = "delay", "1s" }, []string{`limits[0].on_limit: delay applies only to token_bucket and gcra, not sliding_window_counter`}},
		{"delay rates", func(c *config.Config) { bucket(c); c.Limits[0].Rates = []string{"10/s", "100/m"} }, []string{`limits[0].on_limit: delay needs exactly one rate, got 2`}},
		{"delay shadow", func(c *config.Config) { bucket(c); c.Limits[0].Mode = "shadow" }, []string{`limits[0].on_limit: delay cannot be used with mode = "shadow"`}},
		{"delay response", func(c *config.Config) { bucket(c); c.Limits[0].Count = "response" }, []string{`limits[0].on_limit: delay cannot be used with count = "response"`}},
		{"delay without max", func(c *config.Config) { bucket(c); c.Limits[0].MaxDelay = "" }, []string{`limits[0].max_delay: is required with on_limit = "delay"`}},
		{"max_delay zero", func(c *config.Config) { bucket(c); c.Limits[0].MaxDelay = "0s" }, []string{`limits[0].max_delay: must be positive, got 0s`}},
		{"max_delay huge", func(c *config.Config) { bucket(c); c.Limits[0].MaxDelay = "9000h" }, []string{`limits[0].max_delay: must be a whole number of microseconds up to 366 days`}},
		{"max_waiting zero", func(c *config.Config) { bucket(c); c.Limits[0].MaxWaiting = 0 }, []string{`limits[0].max_waiting: must be in 1..1048576, got 0`}},
	}
	testProblems(t, base, tests)
}

// TestCompileResponseAndDelay: valid settings compile to what the proxy
// reads.
func TestCompileResponseAndDelay(t *testing.T) {
	c := base()
	c.Limits[0].Count, c.Limits[0].CountStatuses, c.Limits[0].CostResponseHeader = "response", []string{"401", "500-599"}, "x-units"
	c.Limits[1].Algorithm, c.Limits[1].Rates, c.Limits[1].OnLimit, c.Limits[1].MaxDelay, c.Limits[1].MaxWaiting = "gcra", []string{"10/s"}, "delay", "750ms", 7
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	var resp, del *Limit
	for _, r := range p.Routes {
		for _, l := range r.Limits {
			switch l.Name {
			case "per-client":
				resp = l
			case "search":
				del = l
			}
		}
	}
	if resp == nil || resp.Response == nil || resp.Response.CostHeader != "X-Units" {
		t.Fatalf("per-client compiled to %+v", resp)
	}
	for status, want := range map[int]bool{200: false, 401: true, 403: false, 499: false, 500: true, 599: true} {
		if got := resp.Response.Counts(status); got != want {
			t.Errorf("Counts(%d) = %v, want %v", status, got, want)
		}
	}
	if del == nil || del.Limit.MaxDelay != 750*time.Millisecond || del.MaxWaiting != 7 || del.Response != nil {
		t.Fatalf("search compiled to %+v", del)
	}
	if (&ResponseCount{}).Counts(302) != true {
		t.Error("no statuses must count every status")
	}
}

// TestResponseCostHostile: what an upstream's cost header can make the
// gateway count. per-client's largest capacity is 600 (600/minute).
func TestResponseCostHostile(t *testing.T) {
	c := base()
	c.Limits[0].Count, c.Limits[0].CostResponseHeader = "response", "X-Units"
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Routes[0].Limits[0]
	tests := []struct {
		name   string
		values []string
		want   int64
		ok     bool
	}{
		{"absent", nil, 3, true},
		{"plain", []string{"42"}, 42, true},
		{"huge: capped at the largest capacity", []string{"9007199254740992"}, 600, true},
		{"past 2^53", []string{"9007199254740993"}, 3, false},
		{"negative", []string{"-5"}, 3, false},
		{"zero", []string{"0"}, 3, false},
		{"float", []string{"1.5"}, 3, false},
		{"hex", []string{"0x10"}, 3, false},
		{"spaces", []string{" 7"}, 3, false},
		{"twice", []string{"1", "2"}, 3, false},
		{"empty", []string{""}, 3, false},
		{"long", []string{strings.Repeat("9", 10000)}, 3, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.values != nil {
			h["X-Units"] = tt.values
		}
		got, ok := l.ResponseCost(h, 3)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: ResponseCost = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestWaitShare: a delay limit's key may hold max(1, max_waiting / 8) of
// its waiting room, unless every client has the same key. The oracle is
// written out per row, not computed.
func TestWaitShare(t *testing.T) {
	for _, tc := range []struct {
		by         []string
		maxWaiting int
		want       int
	}{
		{[]string{"client"}, 1024, 128},
		{[]string{"client"}, 24, 3},
		{[]string{"client"}, 15, 1},
		{[]string{"client"}, 7, 1},
		{[]string{"client"}, 1, 1},
		{[]string{"api_key"}, 16, 2},
		{[]string{"header:X-Tenant"}, 16, 2},
		{[]string{"method"}, 16, 2},      // a client may send any method a route allows
		{[]string{"route", "ip"}, 16, 2}, // ip varies by client
		{[]string{}, 16, 16},             // one key for every client
		{[]string{"route"}, 16, 16},      // one key per route, none a client can make
	} {
		c := base()
		c.Limits[1].Algorithm, c.Limits[1].Rates, c.Limits[1].OnLimit, c.Limits[1].MaxDelay = "token_bucket", []string{"10/s"}, "delay", "1s"
		c.Limits[1].By, c.Limits[1].MaxWaiting = tc.by, tc.maxWaiting
		p, err := Compile(c, noEnv, os.ReadFile)
		if err != nil {
			t.Fatalf("by %v: %v", tc.by, err)
		}
		l := p.Limit("search")
		if l == nil || l.WaitShare != tc.want {
			t.Errorf("by %v, max_waiting %d: WaitShare %+v, want %d", tc.by, tc.maxWaiting, l, tc.want)
		}
	}
}
