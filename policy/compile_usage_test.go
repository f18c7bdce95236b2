package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestUsageFields: [usage] and limits[].notify_at, one bad value each,
// with the exact problem line; the sink's password never in a message.
func TestUsageFields(t *testing.T) {
	sink := func(c *config.Config) { c.Usage.Sink = "https://user:hunter2@billing.example/in" }
	tests := []problemCase{
		{"valid", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{0.8, 1} }, nil},
		{"scheme", func(c *config.Config) { c.Usage.Sink = "ftp://user:hunter2@h/" }, []string{`usage.sink: scheme "ftp": want http or https`}},
		{"not a URL", func(c *config.Config) { c.Usage.Sink = "http://user:hunter2@[::1/" }, []string{`usage.sink: not a URL`}},
		{"no host", func(c *config.Config) { c.Usage.Sink = "http:///x" }, []string{`usage.sink: no host`}},
		{"relative", func(c *config.Config) { c.Usage.Sink = "/ingest" }, []string{`usage.sink: scheme "": want http or https`}},
		{"fragment", func(c *config.Config) { c.Usage.Sink = "http://h/#x" }, []string{`usage.sink: a fragment is never sent`}},
		{"flush interval", func(c *config.Config) { sink(c); c.Usage.FlushInterval = "0s" }, []string{`usage.flush_interval: must be positive, got 0s`}},
		{"timeout", func(c *config.Config) { sink(c); c.Usage.Timeout = "soon" }, []string{`usage.timeout: invalid duration "soon"`}},
		{"max pending", func(c *config.Config) { sink(c); c.Usage.MaxPending = 0 }, []string{`usage.max_pending: must be in 1..10000000, got 0`}},
		{"batch size", func(c *config.Config) { sink(c); c.Usage.BatchSize = 10001 }, []string{`usage.batch_size: must be in 1..10000, got 10001`}},
		{"notify without sink", func(c *config.Config) { c.Limits[0].NotifyAt = []float64{0.5} }, []string{`limits[0].notify_at: set, but usage.sink is not`}},
		{"notify zero", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{0} }, []string{`limits[0].notify_at[0]: must be a fraction in (0, 1], got 0`}},
		{"notify above 1", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{0.5, 1.5} }, []string{`limits[0].notify_at[1]: must be a fraction in (0, 1], got 1.5`}},
		{"notify NaN", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{math.NaN()} }, []string{`limits[0].notify_at[0]: must be a fraction in (0, 1], got NaN`}},
		{"notify inf", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{math.Inf(1)} }, []string{`limits[0].notify_at[0]: must be a fraction in (0, 1], got +Inf`}},
		{"notify descending", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{0.9, 0.8} }, []string{`limits[0].notify_at[1]: must be above the one before (0.9), got 0.8`}},
		{"notify duplicate", func(c *config.Config) { sink(c); c.Limits[0].NotifyAt = []float64{0.9, 0.9} }, []string{`limits[0].notify_at[1]: must be above the one before (0.9), got 0.9`}},
		{"notify too many", func(c *config.Config) {
			sink(c)
			for i := range 17 {
				c.Limits[0].NotifyAt = append(c.Limits[0].NotifyAt, float64(i+1)/17)
			}
		}, []string{`limits[0].notify_at: at most 16 fractions, got 17`}},
		{"notify concurrency", func(c *config.Config) {
			sink(c)
			c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].MaxInFlight = "concurrency", nil, 2
			c.Limits[0].NotifyAt = []float64{0.5}
		}, []string{`limits[0].notify_at: does not apply to the concurrency algorithm`}},
	}
	testProblems(t, base, tests)
	for _, tt := range tests {
		c := base()
		tt.mutate(&c)
		if err := validate(&c); err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the problem repeats the sink's password: %v", tt.name, err)
		}
	}
}

// TestUsageCompiled: the compiled [usage] and the notify_at table.
func TestUsageCompiled(t *testing.T) {
	c := base()
	if p, err := Compile(c, noEnv, nil); err != nil || p.Usage != nil {
		t.Fatalf("no sink: Usage = %+v, %v; want nil", p.Usage, err)
	}
	c.Usage.Sink = "http://127.0.0.1:9/in"
	c.Limits[1].NotifyAt = []float64{0.5, 1}
	p, err := Compile(c, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := p.Usage; u.Sink.Reveal() != "http://127.0.0.1:9/in" || u.FlushInterval.String() != "10s" || u.MaxPending != 100000 || u.BatchSize != 100 {
		t.Errorf("Usage = %+v", u)
	}
	m := p.NotifyAt()
	if len(m) != 1 || !slices.Equal(m["search"], []float64{0.5, 1}) {
		t.Errorf("NotifyAt() = %v", m)
	}
}

// TestSinkRedacted: /admin/config (the Config as JSON) and every format
// of the sink show neither its user info nor its query.
func TestSinkRedacted(t *testing.T) {
	for _, s := range []string{"https://tok3n@h/in", "https://u:pa55@h/in?key=k3y", "http://h/?k3y", "http://u:pa55@[::1/x"} {
		c := base()
		c.Usage.Sink = config.CredentialURL(s)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out := string(b) + fmt.Sprintf("%v %s %#v %+v", c.Usage.Sink, c.Usage.Sink, c.Usage, c.Usage)
		for _, secret := range []string{"tok3n", "pa55", "k3y"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: %q shows up: %s", s, secret, out)
			}
		}
	}
}
