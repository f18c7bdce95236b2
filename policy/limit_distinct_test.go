package policy

import (
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

// distinctConfig is base() with limit "search" turned into a distinct one.
func distinctConfig(distinct string, rates ...string) config.Config {
	c := base()
	l := &c.Limits[1]
	l.Algorithm, l.Distinct, l.Rates = "distinct", distinct, rates
	return c
}

// TestDistinctConfig is the table of distinct settings, good and hostile:
// each bad one is refused at load with its field path.
func TestDistinctConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *config.Config)
		want string // "" compiles
	}{
		{"ip", func(c *config.Config) { *c = distinctConfig("ip", "5/1h") }, ""},
		{"ip/24", func(c *config.Config) { *c = distinctConfig("ip/24", "5/1h") }, ""},
		{"header", func(c *config.Config) { *c = distinctConfig("header:X-Username", "5/10m") }, ""},
		{"path", func(c *config.Config) { *c = distinctConfig("path", "1000/1h") }, ""},
		{"api_key", func(c *config.Config) { *c = distinctConfig("api_key", "3/1d") }, ""},
		{"missing distinct", func(c *config.Config) { *c = distinctConfig("", "5/1h") }, "limits[1].distinct: is required"},
		{"distinct on another algorithm", func(c *config.Config) { c.Limits[1].Distinct = "ip" }, "limits[1].distinct: applies only to algorithm \"distinct\""},
		{"unknown part", func(c *config.Config) { *c = distinctConfig("cookie:x", "5/1h") }, "limits[1].distinct: distinct \"cookie:x\""},
		{"ip/0", func(c *config.Config) { *c = distinctConfig("ip/0", "5/1h") }, "want ip/<1..32>"},
		{"ip/33", func(c *config.Config) { *c = distinctConfig("ip/33", "5/1h") }, "want ip/<1..32>"},
		{"ip/huge", func(c *config.Config) { *c = distinctConfig("ip/"+strings.Repeat("9", 400), "5/1h") }, "want ip/<1..32>"},
		{"bad header name", func(c *config.Config) { *c = distinctConfig("header:X User", "5/1h") }, "limits[1].distinct"},
		{"two rates", func(c *config.Config) { *c = distinctConfig("ip", "5/1h", "50/1d") }, "distinct takes exactly one rate"},
		{"17 sub-windows", func(c *config.Config) {
			*c = distinctConfig("ip", "5/17m")
			c.Limits[1].Precision = "1m"
		}, "more than 16"},
		{"a window a quarter of which is no whole microsecond", func(c *config.Config) { *c = distinctConfig("ip", "5/1us") }, "set precision"},
		{"precision not dividing", func(c *config.Config) {
			*c = distinctConfig("ip", "5/1h")
			c.Limits[1].Precision = "7m"
		}, "does not split"},
		{"burst", func(c *config.Config) {
			*c = distinctConfig("ip", "5/1h")
			c.Limits[1].Burst = 3
		}, "burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			_, err := Compile(c, noEnv, os.ReadFile)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Compile: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Compile = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestDistinctValueHostile is the table of values a client sends a
// distinct limit: each has a defined hash, a missing one is missing (and
// rejected only with on_missing = "reject"), and a huge one is hashed
// like any other, into 64 bits.
func TestDistinctValueHostile(t *testing.T) {
	c := distinctConfig("header:X-Username", "5/10m")
	c.Limits[1].OnMissing = "reject"
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limits[1]
	id := &keys.Identity{IP: netip.MustParseAddr("192.0.2.1")}
	val := func(v ...string) (uint64, bool) {
		h := http.Header{}
		if v != nil {
			h["X-Username"] = v
		}
		return l.DistinctValue(p.Identity, id, &keys.Values{Header: h}, "/login")
	}
	a, okA := val("alice")
	b, okB := val("bob")
	if !okA || !okB || a == b {
		t.Fatalf("alice %x %v, bob %x %v: want two values", a, okA, b, okB)
	}
	if a2, _ := val("alice", "mallory"); a2 != a {
		t.Errorf("a second header value changed the value: only the first counts")
	}
	if _, ok := val(); ok {
		t.Errorf("absent header with on_missing = reject: accepted")
	}
	if _, ok := val(""); ok {
		t.Errorf("empty header with on_missing = reject: accepted")
	}
	huge := strings.Repeat("x", 1<<20)
	h1, ok1 := val(huge)
	h2, _ := val(huge + "y")
	if !ok1 || h1 == h2 {
		t.Errorf("huge values: %x %v, %x: want two values", h1, ok1, h2)
	}
	// Without reject, a missing value counts as one value, the missing one.
	c.Limits[1].OnMissing = "shared"
	p, err = Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Limits[1].DistinctValue(p.Identity, id, &keys.Values{Header: http.Header{}}, "/login"); !ok {
		t.Errorf("absent header with on_missing = shared: rejected")
	}
}
