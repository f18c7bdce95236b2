package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestRLSHostile drives the rate limit service through the binary with
// the hostile inputs docs/hostile-inputs.md tables for it ("Envoy rate
// limit service"): thousands of domains, the largest request it accepts,
// fields it does not know, thousands of unknown domains asked for, YAML
// nested past the parser's bound.
func TestRLSHostile(t *testing.T) {
	t.Parallel()
	// 2,000 domains, one file each, as a deployment of a domain per
	// tenant writes them: all load (the reference reads any number of
	// files).
	const domains = 2000
	dir := t.TempDir()
	for i := range domains {
		yaml := fmt.Sprintf("domain: tenant-%04d\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: %d}\n", i, i+1)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tenant-%04d.yaml", i)), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "validate.toml")
	writeFileAtomic(t, cfg, []byte(fmt.Sprintf("[rls]\nlisten = \"127.0.0.1:0\"\nenvoy_config = [%q]\n", dir+"/*.yaml")))
	code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg)
	if want := fmt.Sprintf("%d files, %d domains, %d rate limits", domains, domains, domains); code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("validate: exit %d, want 0 saying %q\n%s%s", code, want, stdout, stderr)
	}
	g := startGateway(t, "rls.toml.tmpl", gwOpts{Data: map[string]any{"Dir": dir, "Extra": ""}, FreshPorts: []string{"RLS"},
		Env: []string{clockSkewEnv + "=" + noonOffset().String()}})
	c := dialRLS(t, g.Port("RLS"))
	k := &conf{t: t, c: c}
	k.expect("first domain", req("tenant-0000", 1, desc("user", "u")), ok(1, uDay, 0))
	k.expect("last domain", req("tenant-1999", 1, desc("user", "u")), ok(2000, uDay, 1999))

	// Thousands of domains no file names, asked for: OK, and none
	// becomes a metric label (they are the caller's values).
	for i := range 2000 {
		k.expect("unknown domain", req(fmt.Sprintf("nowhere-%d", i), 1, desc("user", "u")), noLimit)
	}
	m := grepLines(string(adminDo(t, g, "GET", "/metrics", "").Body), "tollgate_rls_descriptors_total{")
	if strings.Contains(m, "nowhere") || strings.Count(m, "\n") > 4 {
		t.Fatalf("metric series after 2,000 unknown domains:\n%s", m)
	}

	// The largest request accepted: 64 descriptors of 32 entries, values
	// making it just under the 1 MiB message bound. Answered, each
	// descriptor on its own (none matches past the first entry).
	value := strings.Repeat("v", (1<<20-64*1024)/(64*32))
	big := make([]*commonpb.RateLimitDescriptor, 64)
	for i := range big {
		kv := make([]string, 0, 64)
		for range 32 {
			kv = append(kv, "user", value)
		}
		big[i] = desc(kv...)
	}
	r := req("tenant-0001", 1, big...)
	if n := proto.Size(r); n >= 1<<20 || n < 1<<19 {
		t.Fatalf("request of %d bytes, want just under 1 MiB", n)
	}
	want := make([]rlsWant, 64)
	for i := range want {
		want[i] = noLimit
	}
	k.expect("64 descriptors of 32 entries", r, want...)
	// One descriptor more, or one entry more: refused before matching.
	k.refused("65 descriptors", req("tenant-0001", 1, append(big[:64:64], desc("user", "u"))...), codes.InvalidArgument)
	deep := make([]string, 0, 66)
	for range 33 {
		deep = append(deep, "user", "u")
	}
	k.refused("33 entries", req("tenant-0001", 1, desc(deep...)), codes.InvalidArgument)

	// Fields this version does not know (a newer Envoy's): skipped, the
	// answer as without them; a 256 KiB one costs nothing more.
	unknown := func(m proto.Message) {
		var b []byte
		b = protowire.AppendTag(b, 999, protowire.VarintType)
		b = protowire.AppendVarint(b, math.MaxUint64)
		b = protowire.AppendTag(b, 1000, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte(strings.Repeat("x", 256<<10)))
		m.ProtoReflect().SetUnknown(b)
	}
	d := desc("user", "unknown-fields")
	unknown(d)
	unknown(d.GetEntries()[0])
	r = req("tenant-0009", 1, d)
	unknown(r)
	k.expect("unknown fields", r, ok(10, uDay, 9))
	k.expect("unknown fields again", req("tenant-0009", 1, desc("user", "unknown-fields")), ok(10, uDay, 8))
}

// TestRLSYAMLNesting: YAML nested past the parser's bound (10,000) is
// refused with the file and line, in the time of one parse; within it,
// a value the service never reads (metadata) loads, and descriptors
// nested past 32 are refused with their path.
func TestRLSYAMLNesting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
		code             int
	}{
		{"flow sequences 200,000 deep", "domain: d\ndescriptors:\n  - key: k\n    metadata: " + strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000) + "\n",
			"not YAML: line 4: exceeded max depth of 10000", 2},
		{"metadata 9,000 deep", "domain: d\ndescriptors:\n  - key: k\n    metadata: " + strings.Repeat("{a: ", 9000) + "1" + strings.Repeat("}", 9000) + "\n",
			"1 domains, 0 rate limits", 0},
		{"descriptors 33 deep", "domain: d\ndescriptors:\n" + nestedDescriptors(33), "descriptors nested more than 32 deep", 2},
		{"descriptors 32 deep", "domain: d\ndescriptors:\n" + nestedDescriptors(32), "1 domains, 1 rate limits", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFileAtomic(t, filepath.Join(dir, "n.yaml"), []byte(tc.yaml))
			cfg := filepath.Join(dir, "gateway.toml")
			writeFileAtomic(t, cfg, []byte("[rls]\nlisten = \"127.0.0.1:0\"\nenvoy_config = [\"*.yaml\"]\n"))
			code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
				t.Fatalf("exit %d, want %d saying %q\n%s%s", code, tc.code, tc.want, stdout, stderr)
			}
		})
	}
}

// nestedDescriptors is n levels of descriptors, a rate limit at the
// deepest.
func nestedDescriptors(n int) string {
	var b strings.Builder
	for i := range n {
		ind := strings.Repeat("  ", 2*i+1)
		b.WriteString(ind + "- key: k\n")
		if i == n-1 {
			b.WriteString(ind + "  rate_limit: {unit: minute, requests_per_unit: 1}\n")
		} else {
			b.WriteString(ind + "  descriptors:\n")
		}
	}
	return b.String()
}
