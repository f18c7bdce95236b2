package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

func sum(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// consumersConfig is a configuration with two plans, a per-consumer limit
// with plan rates and a registry file named "consumers.toml".
func consumersConfig() config.Config {
	c := config.Default()
	c.Consumers.File = "consumers.toml"
	c.Plans = []config.PlanConfig{{Name: "free"}, {Name: "pro"}}
	l := config.DefaultLimit()
	l.Name, l.Algorithm, l.By, l.Rates = "per-consumer", "fixed_window", []string{"consumer"}, []string{"2/s"}
	l.PlanRates = map[string][]string{"free": {"10/s", "1000/day"}, "pro": {"100/s"}}
	c.Limits = []config.LimitConfig{l}
	r := config.DefaultRoute()
	r.Name, r.Upstream, r.Limits = "api", "http://127.0.0.1:1", []string{"per-consumer"}
	c.Routes = []config.RouteConfig{r}
	return c
}

func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := m[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
}

func TestLimitFor(t *testing.T) {
	reg := `
[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["` + sum("acme-1") + `", "` + sum("acme-2") + `"]
[consumers.rates]
per-consumer = ["500/s"]

[[consumers]]
name = "bob"
plan = "free"
api_keys_env = "BOB_KEYS"

[[consumers]]
name = "carol"
api_keys_sha256 = ["` + strings.ToUpper(sum("carol")) + `"]
`
	env := func(k string) string {
		if k == "BOB_KEYS" {
			return " bob-1 , bob-2,"
		}
		return ""
	}
	p, err := Compile(consumersConfig(), env, files(map[string]string{"consumers.toml": reg}))
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limit("per-consumer")
	reg2 := p.Consumers.Registry
	ident := func(key string) *keys.Identity {
		id := keys.Identity{}
		if c := reg2.ByKey(key); c != nil {
			id.Consumer, id.Plan, id.PlanIndex = c, c.Plan, c.PlanIndex
		}
		return &id
	}
	for _, tc := range []struct {
		key   string
		rates string
	}{
		{"acme-1", "500/1s"}, // its own rates beat its plan's
		{"acme-2", "500/1s"},
		{"bob-1", "10/1s 1000/24h0m0s"},
		{"bob-2", "10/1s 1000/24h0m0s"},
		{"carol", "2/1s"}, // no plan: the limit's rates
		{"nobody", "2/1s"},
	} {
		got := l.For(ident(tc.key))
		var rs []string
		for _, r := range got.Rates {
			rs = append(rs, r.String())
		}
		if s := strings.Join(rs, " "); s != tc.rates {
			t.Errorf("key %q: rates %s, want %s", tc.key, s, tc.rates)
		}
		if got.Name != l.Name {
			t.Errorf("key %q: variant named %q", tc.key, got.Name)
		}
	}
	// Same windows, same counters: pro's 100/s and acme's 500/s share the
	// base's ID; free's second window makes another.
	if pro := l.For(&keys.Identity{PlanIndex: 2}); pro.ID != l.ID {
		t.Errorf("pro variant ID %q, want the base's %q", pro.ID, l.ID)
	}
	if free := l.For(&keys.Identity{PlanIndex: 1}); free.ID == l.ID {
		t.Errorf("free variant has other windows but the base's ID")
	}
	if n := len(l.Variants()); n != 4 {
		t.Errorf("Variants: %d, want 4 (base, free, pro, acme)", n)
	}
	if got := p.Routes[0].RateLimitPolicyFor(&keys.Identity{PlanIndex: 2}); got != `"per-consumer";q=100;w=1` {
		t.Errorf("pro RateLimit-Policy %q", got)
	}
	long := strings.Repeat("k", 200) // longer than a stack buffer for []byte(key)
	if allocs := testing.AllocsPerRun(100, func() {
		var id keys.Identity
		if c := reg2.ByKey("acme-1"); c != nil {
			id.Consumer, id.PlanIndex = c, c.PlanIndex
		}
		_ = reg2.ByKey(long)
		_ = l.For(&id)
	}); allocs != 0 {
		t.Errorf("For with a registry lookup: %v allocations, want 0", allocs)
	}
}

// TestRegistryProblems: validate names every registry problem with the
// file and field path, in one run.
func TestRegistryProblems(t *testing.T) {
	reg := `
[[consumers]]
name = "acme"
plan = "gold"
api_keys_sha256 = ["` + sum("k1") + `", "zz", "` + strings.Repeat("g", 64) + `"]
[consumers.rates]
nope = ["5/s"]
per-consumer = ["5/x"]

[[consumers]]
name = "acme"
api_keys_sha256 = ["` + sum("k1") + `"]
api_keys_env = "UNSET_KEYS"

[[consumers]]
name = "bad name"
api_keys_file = "missing.txt"
colour = "red"

[[consumers]]
name = "nokeys"
`
	c := consumersConfig()
	c.Limits[0].PlanRates["platinum"] = []string{"1/s"}
	c.Limits[0].Exempt.Consumers = []string{"ghost"}
	_, err := Compile(c, func(string) string { return "" }, files(map[string]string{"consumers.toml": reg}))
	if err == nil {
		t.Fatal("want errors")
	}
	got := err.Error()
	for _, want := range []string{
		`limits[0].plan_rates.platinum: unknown plan "platinum"`,
		`consumers.toml: consumers[2].colour: unknown key`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	// The registry is compiled only once the file decodes: fix the
	// unknown key and the rest shows.
	reg = strings.Replace(reg, `colour = "red"`, "", 1)
	_, err = Compile(c, func(string) string { return "" }, files(map[string]string{"consumers.toml": reg}))
	got = err.Error()
	for _, want := range []string{
		`limits[0].plan_rates.platinum: unknown plan "platinum"`,
		`consumers.toml: consumers[0].plan: unknown plan "gold"`,
		`consumers.toml: consumers[0].api_keys_sha256[1]: malformed SHA-256 "zz"`,
		`consumers.toml: consumers[0].api_keys_sha256[2]: malformed SHA-256`,
		`consumers.toml: consumers[0].rates.nope: unknown limit "nope"`,
		`consumers.toml: consumers[0].rates.per-consumer[0]:`,
		`consumers.toml: consumers[1].name: duplicate consumer name "acme"`,
		`consumers.toml: consumers[1].api_keys_sha256[0]: key already belongs to consumer "acme" (consumers[0].api_keys_sha256[0])`,
		`consumers.toml: consumers[1].api_keys_env: environment variable UNSET_KEYS is empty or unset`,
		`consumers.toml: consumers[2].name: invalid name "bad name"`,
		`consumers.toml: consumers[2].api_keys_file: `,
		`consumers.toml: consumers[3]: no keys`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	var n int
	for range strings.SplitSeq(got, "\n") {
		n++
	}
	if n < 12 {
		t.Errorf("%d problems, want every one:\n%s", n, got)
	}
	if _, err := Compile(consumersConfig(), nil, files(nil)); err == nil || !strings.Contains(err.Error(), "consumers.file:") {
		t.Errorf("missing registry file: %v", err)
	}
}
