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
		return l.DistinctValue(p.Identity, id, &keys.Values{Header: h}, "/login", "")
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
	if _, ok := p.Limits[1].DistinctValue(p.Identity, id, &keys.Values{Header: http.Header{}}, "/login", ""); !ok {
		t.Errorf("absent header with on_missing = shared: rejected")
	}
}

// TestDistinctValueSpellings is the table of spellings a client may try
// to make one value count as several (to dodge nothing, but to inflate
// its own count) or several as one (to dodge the limit), and what the
// value is: one value where the gateway treats the request alike, two
// where the request reaches something else or is sent differently.
func TestDistinctValueSpellings(t *testing.T) {
	type req struct {
		ip, path string
		hdr      []string
	}
	for _, tc := range []struct {
		distinct string
		a, b     req
		same     bool
		why      string
	}{
		{"ip", req{ip: "192.0.2.1"}, req{ip: "::ffff:192.0.2.1"}, true, "an IPv4-mapped IPv6 address is its IPv4 address"},
		{"ip", req{ip: "fe80::1%eth0"}, req{ip: "fe80::1"}, true, "a zone is not part of the address"},
		{"ip", req{ip: "2001:db8::1"}, req{ip: "2001:db8::ffff:1"}, true, "IPv6 addresses of one ipv6_prefix (/64) are one client"},
		{"ip", req{ip: "2001:db8::1"}, req{ip: "2001:db8:0:1::1"}, false, "two /64s are two clients"},
		{"ip/24", req{ip: "198.51.100.7"}, req{ip: "::ffff:198.51.100.250"}, true, "ip/24 masks the mapped address too"},
		{"ip/24", req{ip: "198.51.100.7"}, req{ip: "198.51.101.7"}, false, "two networks"},
		{"path", req{path: "/a/b"}, req{path: "/a//./c/../b"}, true, "dot segments and // resolve"},
		{"path", req{path: "/a/b"}, req{path: "/%61/%62"}, true, "escaped unreserved characters decode"},
		{"path", req{path: "/a/b"}, req{path: "/a/b?page=2"}, true, "the query is not part of the path: a scraper walking ?id=N shows one path"},
		{"path", req{path: "/a/b"}, req{path: "/a/b/"}, false, "a trailing slash is another path (counts the client twice, dodges nothing)"},
		{"path", req{path: "/a/b"}, req{path: "/A/b"}, false, "paths are case-sensitive"},
		{"header:X-Username", req{hdr: []string{"alice"}}, req{hdr: []string{"Alice"}}, false, "values as sent: case variants are more values (the client's own count grows)"},
		{"header:X-Username", req{hdr: []string{"alice"}}, req{hdr: []string{"alice", "bob"}}, true, "only the first header value counts"},
		{"header:X-Username", req{hdr: []string{"-"}}, req{}, false, "a literal \"-\" is not the missing value"},
		{"header:X-Username", req{hdr: []string{""}}, req{}, true, "an empty header is the missing value"},
	} {
		t.Run(tc.distinct+" "+tc.why, func(t *testing.T) {
			p, err := Compile(distinctConfig(tc.distinct, "5/10m"), noEnv, os.ReadFile)
			if err != nil {
				t.Fatal(err)
			}
			l := p.Limits[1]
			val := func(r req) uint64 {
				if r.ip == "" {
					r.ip = "192.0.2.200"
				}
				raw, _, _ := strings.Cut(r.path, "?")
				if raw == "" {
					raw = "/"
				}
				path, err := NormalizePath(raw)
				if err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				if r.hdr != nil {
					h["X-Username"] = r.hdr
				}
				id := &keys.Identity{IP: netip.MustParseAddr(r.ip)}
				v, _ := l.DistinctValue(p.Identity, id, &keys.Values{Header: h}, path, "")
				return v
			}
			if got := val(tc.a) == val(tc.b); got != tc.same {
				t.Errorf("same value = %v, want %v (%s)", got, tc.same, tc.why)
			}
		})
	}
}
