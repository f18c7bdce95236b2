package policy

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// costLimit compiles base() with limit "search" (100/minute) given cost
// settings, and returns it.
func costLimit(t *testing.T, cost, costMin int64, header string, trusted ...string) *Limit {
	t.Helper()
	c := base()
	c.Limits[1].Cost, c.Limits[1].CostMin, c.Limits[1].CostHeader = cost, costMin, header
	c.Limits[1].CostHeaderTrustedFrom = trusted
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p.Limits[1]
}

// TestRequestCostHostile is the hostile-input table for cost headers: what
// a client may send to pay less than the operator meant, to dodge the
// limit, or to make the gateway spend, and the defined answer to each.
func TestRequestCostHostile(t *testing.T) {
	const peer, proxy = "198.51.100.7:40000", "10.0.0.2:51000"
	floor5 := costLimit(t, 5, 0, "X-Cost")                // cost 5, floor defaults to cost
	open1 := costLimit(t, 5, 1, "X-Cost")                 // operator lets clients declare down to 1
	trusted := costLimit(t, 5, 1, "X-Cost", "10.0.0.0/8") // only the proxy's header counts
	static := costLimit(t, 5, 0, "")                      // no header: static
	for _, tc := range []struct {
		name   string
		l      *Limit
		peer   string
		values []string // nil: header absent
		want   int64    // 0: 400
	}{
		{"absent: the static cost", floor5, peer, nil, 5},
		{"empty: the static cost", floor5, peer, []string{""}, 5},
		{"below the floor is raised to it (cost = 5)", floor5, peer, []string{"1"}, 5},
		{"above the floor: as declared", floor5, peer, []string{"7"}, 7},
		{"explicit floor 1: declared 1", open1, peer, []string{"1"}, 1},
		{"zero", open1, peer, []string{"0"}, 0},
		{"negative", open1, peer, []string{"-1"}, 0},
		{"plus sign", open1, peer, []string{"+5"}, 0},
		{"leading zeros", open1, peer, []string{"0007"}, 7},
		{"2^53: accepted (above any capacity: a 429 from the store)", open1, peer, []string{"9007199254740992"}, 1 << 53},
		{"2^53 + 1", open1, peer, []string{"9007199254740993"}, 0},
		{"2^63: would wrap", open1, peer, []string{"9223372036854775808"}, 0},
		{"2^64 + 1: would wrap to 1", open1, peer, []string{"18446744073709551617"}, 0},
		{"huge", open1, peer, []string{strings.Repeat("9", 10000)}, 0},
		{"exponent", open1, peer, []string{"1e3"}, 0},
		{"float", open1, peer, []string{"1.5"}, 0},
		{"hex", open1, peer, []string{"0x10"}, 0},
		{"NaN", open1, peer, []string{"NaN"}, 0},
		{"inner space", open1, peer, []string{"3 3"}, 0},
		{"outer whitespace (net/http trims it; a raw value keeps it)", open1, peer, []string{" 3\t"}, 0},
		{"list", open1, peer, []string{"1, 100"}, 0},
		{"duplicated: which copy counts would depend on the reader", open1, peer, []string{"1", "100"}, 0},
		{"non-ASCII digits", open1, peer, []string{"３"}, 0},
		{"untrusted peer: header ignored, even a cheap one", trusted, peer, []string{"1"}, 5},
		{"untrusted peer: header ignored, even malformed", trusted, peer, []string{"abc"}, 5},
		{"untrusted peer: header ignored, even an expensive one", trusted, peer, []string{"50"}, 5},
		{"trusted peer: believed", trusted, proxy, []string{"1"}, 1},
		{"trusted peer: malformed is still 400", trusted, proxy, []string{"abc"}, 0},
		{"trusted peer as IPv4-mapped IPv6", trusted, "[::ffff:10.0.0.2]:51000", []string{"2"}, 2},
		{"garbage RemoteAddr is no trusted peer", trusted, "nonsense", []string{"1"}, 5},
		{"static limit ignores any header", static, peer, []string{"1"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.values != nil {
				h["X-Cost"] = tc.values
			}
			got, err := tc.l.RequestCost(h, tc.peer)
			switch {
			case tc.want == 0 && err == nil:
				t.Fatalf("cost %d, want an error (400)", got)
			case tc.want != 0 && err != nil:
				t.Fatalf("error %v, want cost %d", err, tc.want)
			case got != tc.want:
				t.Fatalf("cost %d, want %d", got, tc.want)
			}
			if err != nil && len(err.Error()) > 120 {
				t.Errorf("the error echoes %d bytes of client text: %q", len(err.Error()), err)
			}
		})
	}
}

// TestCostSettingsValidate: the floor and the trusted peers need a cost
// header, and a floor above the static cost would make a request without
// the header pay less than the floor.
func TestCostSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(l *config.LimitConfig)
		want   string
	}{
		{"cost_min without header", func(l *config.LimitConfig) { l.CostMin = 2 }, "limits[1].cost_min: applies only with cost_header"},
		{"trusted_from without header", func(l *config.LimitConfig) { l.CostHeaderTrustedFrom = []string{"10.0.0.0/8"} }, "limits[1].cost_header_trusted_from: applies only with cost_header"},
		{"cost_min above cost", func(l *config.LimitConfig) { l.CostHeader, l.Cost, l.CostMin = "X-Cost", 2, 3 }, "limits[1].cost_min: must be in 1..cost (2), got 3"},
		{"cost_min negative", func(l *config.LimitConfig) { l.CostHeader, l.CostMin = "X-Cost", -1 }, "limits[1].cost_min: must be in 1..cost (1), got -1"},
		{"bad CIDR", func(l *config.LimitConfig) { l.CostHeader, l.CostHeaderTrustedFrom = "X-Cost", []string{"10.0.0.0/33"} }, `limits[1].cost_header_trusted_from[0]: invalid CIDR "10.0.0.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c.Limits[1])
			err := validate(&c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzParseCost holds parseCost against a model built from strconv: a cost
// is 1 to 20 ASCII digits naming 1..2^53, and nothing else.
func FuzzParseCost(f *testing.F) {
	for _, s := range []string{"1", "0", "9007199254740992", "9007199254740993", "+1", " 1", "1e3", "0x1", "00000000000000000001", "18446744073709551617", "３"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := parseCost(v)
		digits := len(v) >= 1 && len(v) <= maxCostHeaderLen
		for i := 0; i < len(v); i++ {
			digits = digits && v[i] >= '0' && v[i] <= '9'
		}
		var want int64
		wantOK := false
		if digits {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n >= 1 && n <= 1<<53 {
				want, wantOK = int64(n), true
			}
		}
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("parseCost(%q) = %d, %v; model %d, %v", v, got, ok, want, wantOK)
		}
	})
}
