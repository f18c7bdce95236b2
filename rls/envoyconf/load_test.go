package envoyconf

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/gateway/ratelimit"
)

func load(t *testing.T, files ...string) (*Config, error) {
	t.Helper()
	var fs []File
	for i, f := range files {
		fs = append(fs, File{Name: []string{"a.yaml", "b.yaml", "c.yaml"}[i], Data: []byte(f)})
	}
	return Load(fs)
}

// TestLoadRefuses transcribes the reference service's validation errors
// (src/config/config_impl.go of envoyproxy/ratelimit): each bad file is
// refused with its name, the YAML path of the problem and the reference's
// wording.
func TestLoadRefuses(t *testing.T) {
	cases := []struct {
		name  string
		files []string
		want  string
	}{
		{"empty domain", []string{"descriptors: []"}, "a.yaml: domain: config file cannot have empty domain"},
		{"empty file", []string{""}, "a.yaml: config file cannot have empty domain"},
		{"duplicate domain", []string{"domain: d", "domain: d"}, "b.yaml: domain: duplicate domain 'd' in config file"},
		{"empty key", []string{"domain: d\ndescriptors:\n  - value: v\n"}, "a.yaml: descriptors[0].key: descriptor has empty key"},
		{"duplicate key", []string{"domain: d\ndescriptors:\n  - key: k\n  - key: k\n"}, "a.yaml: descriptors[1]: duplicate descriptor composite key 'd.k'"},
		{"duplicate key value nested", []string{"domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - {key: k, value: v}\n      - {key: k, value: v}\n"},
			"a.yaml: descriptors[0].descriptors[1]: duplicate descriptor composite key 'd.a.k_v'"},
		{"bad unit", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"},
			"a.yaml: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'"},
		{"missing unit", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n"},
			"descriptors[0].rate_limit.unit: invalid rate limit unit ''"},
		{"unit when unlimited", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, unlimited: true}\n"},
			"descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited"},
		{"empty replaces", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: \"\"}]}\n"},
			"descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces entry"},
		{"replaces without name", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n"},
			"descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces entry"},
		{"replaces itself", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}\n"},
			"replaces should not contain name of same descriptor"},
		{"unknown key", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limits: {}\n"}, "a.yaml: descriptors[0].rate_limits: config error, unknown key 'rate_limits'"},
		{"unknown top key", []string{"domain: d\nfoo: 1\n"}, "a.yaml: foo: unknown key 'foo'"},
		{"metadata not a mapping", []string{"domain: d\ndescriptors:\n  - key: k\n    metadata: 5\n"}, "a.yaml: descriptors[0].metadata: error parsing metadata: want a mapping"},
		{"metadata with a mapping as a key", []string{"domain: d\ndescriptors:\n  - key: k\n    metadata: {? {a: 1} : x}\n"}, "descriptors[0].metadata: error parsing metadata: a key is not a scalar"},
		{"list of scalars", []string{"domain: d\ndescriptors:\n  - k\n"}, "descriptors[0]: config error, yaml file contains list of type other than map"},
		{"share_threshold without wildcard", []string{"domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n"},
			"share_threshold can only be used with wildcard values (containing '*'), but found key 'k_v'"},
		{"requests_per_unit not a number", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: lots}\n"},
			"descriptors[0].rate_limit.requests_per_unit: want an integer"},
		{"requests_per_unit negative", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n"},
			"requests_per_unit: want an integer"},
		{"not yaml", []string{"domain: [\n"}, "a.yaml: not YAML"},
		{"quota_mode", []string{"domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n"}, "quota_mode is not supported"},
		{"extension without rate_limit", []string{"domain: d\ndescriptors:\n  - key: k\n    algorithm: gcra\n"}, "descriptors[0].algorithm: applies only to a descriptor with a rate_limit"},
		{"unknown algorithm", []string{"domain: d\ndescriptors:\n  - key: k\n    algorithm: leaky\n    rate_limit: {unit: second, requests_per_unit: 1}\n"}, "descriptors[0].algorithm: unknown algorithm"},
		{"burst on fixed window", []string{"domain: d\ndescriptors:\n  - key: k\n    burst: 5\n    rate_limit: {unit: second, requests_per_unit: 1}\n"}, "descriptors[0].burst: burst applies only to token_bucket and gcra"},
		{"lease_size without batched", []string{"domain: d\ndescriptors:\n  - key: k\n    lease_size: 5\n    rate_limit: {unit: second, requests_per_unit: 10}\n"}, "descriptors[0].lease_size: applies only with sync: batched"},
		{"lease above the limit", []string{"domain: d\ndescriptors:\n  - key: k\n    sync: batched\n    lease_size: 50\n    rate_limit: {unit: second, requests_per_unit: 10}\n"}, "lease"},
		{"batched log", []string{"domain: d\ndescriptors:\n  - key: k\n    algorithm: sliding_window_log\n    sync: batched\n    rate_limit: {unit: second, requests_per_unit: 10}\n"}, "descriptors[0]"},
		{"merge key", []string{"domain: d\nx: &x {key: k}\ndescriptors:\n  - <<: *x\n"}, "unknown key 'x'"},
		{"line number", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: eon\n"}, "(line 5)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.files...)
			if err == nil {
				t.Fatalf("accepted: %d rules", len(c.Rules()))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestLoadHostile: files built to cost memory or time are refused by a
// bound, each long before the work they ask for.
func TestLoadHostile(t *testing.T) {
	// A billion laughs: ten levels of ten aliases each would visit 10^10
	// nodes if followed blindly.
	var bomb strings.Builder
	bomb.WriteString("domain: d\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		bomb.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for k := range 10 {
			if k > 0 {
				bomb.WriteString(", ")
			}
			bomb.WriteString("*a" + string(rune('0'+i-1)))
		}
		bomb.WriteString("]\n")
	}
	// Aliases inside descriptors, where they are followed.
	var descBomb strings.Builder
	descBomb.WriteString("domain: d\ndescriptors:\n  - key: k0\n    descriptors: &l00\n      - key: z\n")
	for i := 1; i <= 30; i++ {
		descBomb.WriteString("  - key: k" + itoa(i) + "\n    descriptors: &l" + itoa(i) + "\n      - {key: a, descriptors: *l" + itoa(i-1) + "}\n      - {key: b, descriptors: *l" + itoa(i-1) + "}\n")
	}
	deep := "domain: d\ndescriptors:\n" + strings.Repeat("  ", 0)
	var deepB strings.Builder
	deepB.WriteString(deep)
	for i := range 40 {
		ind := strings.Repeat("  ", 2*i+1)
		deepB.WriteString(ind + "- key: k\n" + ind + "  descriptors:\n")
	}
	cases := []struct {
		name, data, want string
	}{
		{"alias bomb outside descriptors", bomb.String(), "unknown key 'a0'"},
		{"alias bomb in descriptors", descBomb.String(), "YAML nodes"},
		{"too deep", deepB.String(), "nested more than 32 deep"},
		{"too large", "domain: d\n#" + strings.Repeat("x", MaxFileBytes), "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]File{{Name: "h.yaml", Data: []byte(tc.data)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func itoa(i int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string([]byte{byte('0' + i/10), byte('0' + i%10)}))
}

// TestLoadDomainOf10kDescriptors: a large but legal domain loads.
func TestLoadDomainOf10kDescriptors(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: big\ndescriptors:\n")
	for i := range 10000 {
		b.WriteString("  - {key: k, value: v" + strings.Repeat("", 0))
		b.WriteString(itoa5(i) + ", rate_limit: {unit: minute, requests_per_unit: 5}}\n")
	}
	c, err := Load([]File{{Name: "big.yaml", Data: []byte(b.String())}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules()) != 10000 {
		t.Fatalf("%d rules", len(c.Rules()))
	}
	m, _ := c.Match("big", []Entry{{"k", "v09999"}}, nil)
	if m.Rule == nil || m.Rule.Path != "big.k_v09999" {
		t.Fatalf("matched %+v", m.Rule)
	}
}

func itoa5(i int) string {
	s := []byte("00000")
	for k := 4; k >= 0; k-- {
		s[k] = byte('0' + i%10)
		i /= 10
	}
	return string(s)
}

// TestLoadRule: the numbers and flags of a rule as written, and the
// limit compiled from them.
func TestLoadRule(t *testing.T) {
	c, err := load(t, `domain: edge
descriptors:
  - key: remote_address
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: Minute
      requests_per_unit: 60
      name: per_ip
      replaces:
        - name: other
  - key: api
    algorithm: token_bucket
    burst: 20
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: free
    rate_limit: {unlimited: true}
  - key: batched
    sync: batched
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: none
    rate_limit: {unit: hour, requests_per_unit: 0}
`)
	if err != nil {
		t.Fatal(err)
	}
	rs := c.Rules()
	if len(rs) != 5 {
		t.Fatalf("%d rules", len(rs))
	}
	r := rs[0]
	if r.Path != "edge.remote_address" || r.Unit != Minute || r.RequestsPerUnit != 60 || !r.Shadow || !r.DetailedMetric ||
		r.Name != "per_ip" || len(r.Replaces) != 1 || r.Replaces[0] != "other" {
		t.Fatalf("rule %+v", r)
	}
	if l := r.Limit; l.Algorithm != ratelimit.FixedWindow || l.Rates[0] != (ratelimit.Rate{Limit: 60, Window: time.Minute}) || !l.Shadow {
		t.Fatalf("limit %+v", l)
	}
	if l := rs[1].Limit; l.Algorithm != ratelimit.TokenBucket || l.Burst != 20 {
		t.Fatalf("extension limit %+v", l)
	}
	if !rs[2].Unlimited || rs[2].Limit != nil {
		t.Fatalf("unlimited %+v", rs[2])
	}
	if b := rs[3].Limit.Batch; b == nil || b.Lease != 10 || b.Interval != 100*time.Millisecond {
		t.Fatalf("batched %+v", b)
	}
	if !rs[4].DenyAll || rs[4].Limit != nil {
		t.Fatalf("zero %+v", rs[4])
	}
	if Month.Duration() != 30*24*time.Hour || Year.Duration() != 365*24*time.Hour {
		t.Fatal("units differ from the reference's")
	}
}

// TestLoadBounds: thousands of files (a domain each) load; past
// MaxFiles, or past MaxTotalBytes in all, they are refused before any is
// parsed.
func TestLoadBounds(t *testing.T) {
	files := make([]File, 5000)
	for i := range files {
		files[i] = File{Name: "t.yaml", Data: []byte("domain: t" + itoa5(i) + "\ndescriptors:\n  - {key: k, rate_limit: {unit: day, requests_per_unit: 1}}\n")}
	}
	c, err := Load(files)
	if err != nil || c.Domains() != 5000 {
		t.Fatalf("5,000 domains: %v", err)
	}
	if m, _ := c.Match("t04999", []Entry{{"k", "v"}}, nil); m.Rule == nil {
		t.Fatal("the last domain matched nothing")
	}
	if _, err := Load(make([]File, MaxFiles+1)); err == nil || !strings.Contains(err.Error(), "files, more than") {
		t.Fatalf("MaxFiles+1 files: %v", err)
	}
	// One 4 MiB buffer named 17 times: 68 MiB in all.
	data := make([]byte, MaxFileBytes)
	big := make([]File, MaxTotalBytes/MaxFileBytes+1)
	for i := range big {
		big[i] = File{Name: "big.yaml", Data: data}
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "bytes in all files, more than") {
		t.Fatalf("68 MiB: %v", err)
	}
}

// TestLoadMetadata: a descriptor's metadata as the reference reads it,
// the values typed as YAML types them, aliases followed.
func TestLoadMetadata(t *testing.T) {
	c, err := Load([]File{{Name: "m.yaml", Data: []byte(`domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      name: svc
      n: 3
      f: 2.5
      b: true
      z: null
      7: seven
      team: &team {owner: alice}
      again: *team
      list: [1, "1", [x]]
  - key: empty
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Match("d", []Entry{{"k", "v"}}, nil)
	want, _ := structpb.NewStruct(map[string]any{"name": "svc", "n": 3, "f": 2.5, "b": true, "z": nil, "7": "seven",
		"team": map[string]any{"owner": "alice"}, "again": map[string]any{"owner": "alice"}, "list": []any{1, "1", []any{"x"}}})
	if !proto.Equal(m.Rule.Metadata, want) {
		t.Fatalf("metadata %v\nwant %v", m.Rule.Metadata, want)
	}
	if m, _ := c.Match("d", []Entry{{"empty", "v"}}, nil); m.Rule.Metadata != nil {
		t.Fatalf("empty metadata: %v", m.Rule.Metadata)
	}
}
