package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestRLSHostileLogReplay: descriptor values a caller chooses (line
// breaks, quotes, the rls= value's own separators, the hash mark, the
// "-" of an empty field, %-escapes, long ones), logged as they are
// (raw_client), each make one line, and `gateway replay` of the log
// counts each on a counter of its own, deciding every call as it was
// decided live (1 a day per address: each value's first call allowed, its
// second denied). So does a call of one descriptor of 32 entries whose
// keys and values escape to 6 bytes a byte in JSON (its line was written
// with no descriptor, which the parser refuses) and a call of a 100 KiB
// domain (its line was longer than the parser reads).
func TestRLSHostileLogReplay(t *testing.T) {
	t.Parallel()
	values := []string{"a\nb", "a\r\nb", `a"b`, "a=b", "a,b", "a;b", "a:b", "ok:k=v", "~x", "-", "", "%41", "A", "a b",
		"a\tb", "ü", `a\b`, "a\u2028b", strings.Repeat("x", 128), strings.Repeat("x", 129), strings.Repeat("y", 4096)}
	for _, f := range []string{"combined", "jsonl"} {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeRLSYAML(t, dir, "1")
			logPath := filepath.Join(dir, "access.log")
			g := startRLSRest(t, dir, "", fmt.Sprintf("[access_log]\npath = %q\nformat = %q\nraw_client = true\nflush_interval = \"50ms\"\n", logPath, f))
			c := dialRLS(t, g.Port("RLS"))
			calls := 0
			for _, v := range values {
				for i, want := range []rlpb.RateLimitResponse_Code{rlpb.RateLimitResponse_OK, rlpb.RateLimitResponse_OVER_LIMIT} {
					if got := c.one("edge", desc("remote_address", v)).GetOverallCode(); got != want {
						t.Fatalf("value %q call %d: %v, want %v", v, i+1, got, want)
					}
					calls++
				}
			}
			deep := &commonpb.RateLimitDescriptor{}
			for j := range 32 {
				deep.Entries = append(deep.Entries, &commonpb.RateLimitDescriptor_Entry{
					Key: strings.Repeat("\x01", 63) + string(rune('a'+j%26)), Value: strings.Repeat("\x01", 128)})
			}
			if got := c.one("edge", deep).GetOverallCode(); got != rlpb.RateLimitResponse_OK {
				t.Fatalf("deep descriptor: %v", got)
			}
			calls++
			if got := c.one(strings.Repeat("d", 100<<10), desc("k", "v")).GetOverallCode(); got != rlpb.RateLimitResponse_OK {
				t.Fatalf("huge domain: %v", got)
			}
			calls++
			g.stop(t)
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), "\n"); n != calls {
				t.Fatalf("%d lines for %d calls:\n%.4000s", n, calls, data)
			}
			rep := runReplay(t, g.Config, logPath)
			want := fmt.Sprintf("rate limit service: %d calls, %d decided as logged, 0 otherwise", calls, calls)
			if !strings.Contains(rep, want) {
				t.Fatalf("replay report lacks %q:\n%s", want, rep)
			}
		})
	}
}

// TestRLSLongRuleKeysReplay: Envoy Gateway names descriptor keys and
// values after routes ("httproute/NAMESPACE/NAME/rule/0/match/0/HOST"),
// often past 64 bytes. Keys and values a rule names are logged as they
// are (up to 512 bytes), so `gateway replay` matches the rule again and
// decides every call as it was decided live; before, such a key over 64
// bytes (a value over 128) was logged hashed, the replay matched no rule
// and reported the denied calls as allowed. A caller's value under a
// key-only rule is still hashed.
func TestRLSLongRuleKeysReplay(t *testing.T) {
	t.Parallel()
	route := "httproute/payments-production/checkout-api-ratelimited/rule/0/match/0/checkout_payments_example_com"
	long := strings.Repeat("v", 200)
	yaml := "domain: default/eg/http\ndescriptors:\n" +
		"  - key: " + route + "\n    value: " + route + "\n    descriptors:\n" +
		"      - key: rule-0-match-0\n        value: rule-0-match-0\n        rate_limit: {unit: day, requests_per_unit: 2}\n" +
		"  - key: " + route + "-by-client\n    descriptors:\n" +
		"      - key: x-user\n        rate_limit: {unit: day, requests_per_unit: 1}\n" +
		"  - key: long\n    value: " + long + "\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
	for _, f := range []string{"combined", "jsonl"} {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFileAtomic(t, filepath.Join(dir, "eg.yaml"), []byte(yaml))
			logPath := filepath.Join(dir, "access.log")
			g := startRLSRest(t, dir, "", fmt.Sprintf("[access_log]\npath = %q\nformat = %q\nflush_interval = \"50ms\"\n", logPath, f))
			c := dialRLS(t, g.Port("RLS"))
			var want []rlpb.RateLimitResponse_Code
			for range 3 {
				want = append(want, c.one("default/eg/http", desc(route, route, "rule-0-match-0", "rule-0-match-0")).GetOverallCode())
			}
			for range 2 {
				want = append(want, c.one("default/eg/http", desc(route+"-by-client", "", "x-user", "alice")).GetOverallCode())
			}
			for range 2 {
				want = append(want, c.one("default/eg/http", desc("long", long)).GetOverallCode())
			}
			over := 0
			for _, code := range want {
				if code == rlpb.RateLimitResponse_OVER_LIMIT {
					over++
				}
			}
			if over != 3 {
				t.Fatalf("live: %v, want 3 over the limit", want)
			}
			g.stop(t)
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "checkout_payments_example_com") || strings.Contains(string(data), "alice") {
				t.Fatalf("a rule's key hashed or a caller's value raw:\n%s", data)
			}
			rep := runReplay(t, g.Config, logPath)
			line := fmt.Sprintf("rate limit service: %d calls, %d decided as logged, 0 otherwise", len(want), len(want))
			if !strings.Contains(rep, line) {
				t.Fatalf("replay report lacks %q:\n%s", line, rep)
			}
		})
	}
}
