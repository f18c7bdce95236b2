package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/gateway/internal/redistest"
)

// The conformance test: the scenarios of envoyproxy/ratelimit's own
// integration tests (test/integration) and configuration fixtures
// (test/config), its files copied unchanged into testdata/rlsconf (the
// fixtures of test/config all name the domain test-domain, so each copy
// is renamed config-<fixture> to load side by side). The expected answers
// are written by hand from the reference's code and tests; the reference
// itself is not run. The same table runs on the memory store, Redis
// standalone, Redis Sentinel and a Redis Cluster, and must get the same
// answers on each.
//
// Where Tollgate answers differently on purpose, the step says so and
// docs/envoy-rls.md explains it:
//   - atomic calls: a call denied by one descriptor counts none of the
//     others, and a hit denied is not counted (the reference counts both,
//     unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, which still counts a
//     hit that goes over);
//   - duration_until_reset to the microsecond, not whole seconds;
//   - an empty domain, no descriptor or a request limit of unit UNKNOWN
//     are INVALID_ARGUMENT (the reference answers UNKNOWN, and a request
//     limit of unit UNKNOWN crashes its process).
//
// The gateway's clock is moved to noon UTC (store.clock = "local" on
// Redis, so Redis counts on that clock too): the minute windows the
// scenarios fill have a minute to run before one ends. Per-second limits
// are checked by one call each, or filled in one call with hits_addend.

// rlsWant is one descriptor's expected status. A zero rpu and unit means
// no current_limit (no rule, or a rule replaced).
type rlsWant struct {
	code      rlpb.RateLimitResponse_Code
	rpu       uint32
	unit      rlpb.RateLimitResponse_RateLimit_Unit
	remaining uint32
	name      string
}

const (
	rOK   = rlpb.RateLimitResponse_OK
	rOver = rlpb.RateLimitResponse_OVER_LIMIT
	uSec  = rlpb.RateLimitResponse_RateLimit_SECOND
	uMin  = rlpb.RateLimitResponse_RateLimit_MINUTE
	uHour = rlpb.RateLimitResponse_RateLimit_HOUR
	uDay  = rlpb.RateLimitResponse_RateLimit_DAY
	uWeek = rlpb.RateLimitResponse_RateLimit_WEEK
)

// noLimit is the status of a descriptor no rule limits: OK, nothing else.
var noLimit = rlsWant{code: rOK}

// unlimitedWant is an unlimited rule's status: OK, remaining 2^32-1, no
// current_limit.
var unlimitedWant = rlsWant{code: rOK, remaining: math.MaxUint32}

func ok(rpu uint32, unit rlpb.RateLimitResponse_RateLimit_Unit, remaining uint32) rlsWant {
	return rlsWant{code: rOK, rpu: rpu, unit: unit, remaining: remaining}
}

func over(rpu uint32, unit rlpb.RateLimitResponse_RateLimit_Unit) rlsWant {
	return rlsWant{code: rOver, rpu: rpu, unit: unit}
}

var unitLength = map[rlpb.RateLimitResponse_RateLimit_Unit]time.Duration{
	uSec: time.Second, uMin: time.Minute, uHour: time.Hour, uDay: 24 * time.Hour, uWeek: 7 * 24 * time.Hour,
}

// conf drives one gateway: calls and checks.
type conf struct {
	t *testing.T
	c *rlsClient
}

// req builds a request of domain, hits_addend and descriptors.
func req(domain string, hits uint32, ds ...*commonpb.RateLimitDescriptor) *rlpb.RateLimitRequest {
	return &rlpb.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: ds}
}

// withHits sets a descriptor's own hits_addend.
func withHits(d *commonpb.RateLimitDescriptor, n uint64) *commonpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// expect sends r and checks the answer: overall is OVER_LIMIT when any
// want is, and each status as wanted.
func (k *conf) expect(what string, r *rlpb.RateLimitRequest, want ...rlsWant) *rlpb.RateLimitResponse {
	k.t.Helper()
	resp := k.c.call(r)
	overall := rOK
	for _, w := range want {
		if w.code == rOver {
			overall = rOver
		}
	}
	if resp.GetOverallCode() != overall {
		k.t.Fatalf("%s: overall_code %v, want %v\n%v", what, resp.GetOverallCode(), overall, resp)
	}
	if len(resp.GetStatuses()) != len(want) {
		k.t.Fatalf("%s: %d statuses, want %d\n%v", what, len(resp.GetStatuses()), len(want), resp)
	}
	for i, w := range want {
		st := resp.GetStatuses()[i]
		fail := func(format string, args ...any) {
			k.t.Helper()
			k.t.Fatalf("%s: status %d: %s\n%v", what, i, fmt.Sprintf(format, args...), st)
		}
		if st.GetCode() != w.code {
			fail("code %v, want %v", st.GetCode(), w.code)
		}
		if st.GetLimitRemaining() != w.remaining {
			fail("limit_remaining %d, want %d", st.GetLimitRemaining(), w.remaining)
		}
		if w.rpu == 0 && w.unit == 0 {
			if st.GetCurrentLimit() != nil || st.GetDurationUntilReset() != nil {
				fail("current_limit or duration_until_reset set, want neither")
			}
			continue
		}
		cl := st.GetCurrentLimit()
		if cl.GetRequestsPerUnit() != w.rpu || cl.GetUnit() != w.unit || cl.GetName() != w.name {
			fail("current_limit %v, want %d per %v named %q", cl, w.rpu, w.unit, w.name)
		}
		// The window is aligned to the epoch: its end is at most one
		// unit away, and never now.
		if d := st.GetDurationUntilReset().AsDuration(); d <= 0 || d > unitLength[w.unit] {
			fail("duration_until_reset %v, want in (0, %v]", d, unitLength[w.unit])
		}
	}
	return resp
}

// refused sends r and checks it is refused with code c.
func (k *conf) refused(what string, r *rlpb.RateLimitRequest, c codes.Code) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := k.c.c.ShouldRateLimit(ctx, r); status.Code(err) != c {
		k.t.Fatalf("%s: %v, want %v", what, err, c)
	}
}

// countdown expects n calls of r on a limit of rpu per unit, from
// remaining `from`: each OK with one less remaining, then OVER_LIMIT.
func (k *conf) countdown(what string, r *rlpb.RateLimitRequest, rpu uint32, unit rlpb.RateLimitResponse_RateLimit_Unit, from uint32, n int) {
	k.t.Helper()
	for i := range n {
		w := over(rpu, unit)
		if uint32(i) < from {
			w = ok(rpu, unit, from-uint32(i)-1)
		}
		k.expect(fmt.Sprintf("%s, call %d", what, i+1), r, w)
	}
}

// rlsScenarios is the table every store runs, in order (the reload step
// adds reload.yaml, so it comes last).
var rlsScenarios = []struct {
	name string
	run  func(k *conf, g *gw, dir string)
}{
	// integration_test.go testBasicBaseConfig, first call: a domain no
	// file names answers OK with one bare status.
	{"unknown domain", func(k *conf, _ *gw, _ string) {
		k.expect("foo", req("foo", 1, desc("hello", "world")), noLimit)
	}},
	// testBasicBaseConfig: basic key1, 50 a second: 49 left.
	{"basic", func(k *conf, _ *gw, _ string) {
		k.expect("key1", req("basic", 1, desc("key1", "foo")), ok(50, uSec, 49))
		// one_per_minute: 1 a minute, then over.
		k.countdown("one_per_minute", req("basic", 1, desc("one_per_minute", "x")), 1, uMin, 1, 3)
	}},
	// testBasicBaseConfig: another key2, 20 a minute, 25 calls: 19 ... 0,
	// then five OVER_LIMIT.
	{"another", func(k *conf, _ *gw, _ string) {
		k.countdown("key2", req("another", 1, desc("key2", "r1")), 20, uMin, 20, 25)
		// Two keys in one domain, 15 calls: key2 (20 a minute) and key3
		// (10 an hour). Calls 11-15 are denied by key3; the reference
		// counts key2 on them too (9, 8, ... left) unless
		// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, which keeps it at 10 as
		// Tollgate's atomic calls do.
		for i := range 15 {
			key2 := ok(20, uMin, uint32(max(20-(i+1), 10)))
			key3 := ok(10, uHour, uint32(max(10-(i+1), 0)))
			if i >= 10 {
				key3 = over(10, uHour)
			}
			k.expect(fmt.Sprintf("key2+key3, call %d", i+1), req("another", 1, desc("key2", "r2"), desc("key3", "r2")), key2, key3)
		}
		// duration_until_reset falls between two calls (the reference
		// sleeps 2 s between them: it counts whole seconds; these are
		// microseconds).
		a := k.expect("key4 first", req("another", 1, desc("key4", "durTest")), ok(20, uDay, 19))
		b := k.expect("key4 second", req("another", 1, desc("key4", "durTest")), ok(20, uDay, 18))
		if da, db := a.GetStatuses()[0].GetDurationUntilReset().AsDuration(), b.GetStatuses()[0].GetDurationUntilReset().AsDuration(); db >= da {
			k.t.Fatalf("duration_until_reset %v then %v: did not fall", da, db)
		}
	}},
	// TestShareThreshold: files/* with share_threshold counts every value
	// on one counter of 10 an hour; files_no_share/* counts each value
	// apart.
	{"share_threshold", func(k *conf, _ *gw, _ string) {
		const d = "share-threshold-test"
		k.countdown("files/a.pdf", req(d, 1, desc("files", "files/a.pdf")), 10, uHour, 10, 10)
		k.expect("files/b.csv", req(d, 1, desc("files", "files/b.csv")), over(10, uHour))
		for i := range 10 {
			k.expect("files_no_share", req(d, 1, desc("files_no_share", fmt.Sprintf("files_no_share/%d", i))), ok(10, uHour, 9))
		}
	}},
	// TestShareThreshold of test/config, through the service: which
	// values share a counter.
	{"share_threshold nested, middle and multi wildcards", func(k *conf, _ *gw, _ string) {
		const d = "config-share-threshold"
		k.expect("files/a", req(d, 1, desc("files", "files/a")), ok(100, uMin, 99))
		k.expect("files/b shares", req(d, 1, desc("files", "files/b")), ok(100, uMin, 98))
		k.expect("nested", req(d, 1, desc("nested", "parent", "files", "nested/x")), ok(200, uMin, 199))
		k.expect("nested shares", req(d, 1, desc("nested", "parent", "files", "nested/y")), ok(200, uMin, 198))
		// The same key at two levels, both shared.
		k.expect("top/nested", req(d, 1, desc("files", "top/a", "files", "nested/b")), ok(300, uMin, 299))
		k.expect("top/nested shares", req(d, 1, desc("files", "top/c", "files", "nested/d")), ok(300, uMin, 298))
		// A shared parent with a key-only child: the child's value still
		// names its counter.
		k.expect("api GET", req(d, 1, desc("route", "api/a", "method", "GET")), ok(60, uMin, 59))
		k.expect("api GET shares", req(d, 1, desc("route", "api/b", "method", "GET")), ok(60, uMin, 58))
		k.expect("api POST apart", req(d, 1, desc("route", "api/b", "method", "POST")), ok(60, uMin, 59))
		// A shared parent, a wildcard child without share_threshold.
		k.expect("path/file", req(d, 1, desc("path", "path/a", "file", "file/x", "type", "t")), ok(120, uMin, 119))
		k.expect("path shares", req(d, 1, desc("path", "path/b", "file", "file/x", "type", "t")), ok(120, uMin, 118))
		k.expect("file apart", req(d, 1, desc("path", "path/b", "file", "file/y", "type", "t")), ok(120, uMin, 119))
		// Both shared.
		k.expect("user/res", req(d, 1, desc("user", "user/a", "resource", "res/1", "action", "read")), ok(150, uMin, 149))
		k.expect("user/res shares", req(d, 1, desc("user", "user/b", "resource", "res/2", "action", "read")), ok(150, uMin, 148))
		// An explicit value wins over a shared wildcard, and counts apart.
		k.expect("file test1", req(d, 1, desc("file", "test1")), ok(50, uMin, 49))
		k.expect("file test2", req(d, 1, desc("file", "test2")), ok(100, uMin, 99))
		k.expect("file test23 shares", req(d, 1, desc("file", "test23")), ok(100, uMin, 98))
		k.expect("file test123 shares", req(d, 1, desc("file", "test123")), ok(100, uMin, 97))
		// Middle and multiple wildcards.
		k.expect("midpath", req(d, 1, desc("midpath", "/api/v1")), ok(100, uMin, 99))
		k.expect("midpath shares", req(d, 1, desc("midpath", "/api-beta-v1")), ok(100, uMin, 98))
		k.expect("midpath no match", req(d, 1, desc("midpath", "/api/v2")), noLimit)
		k.expect("multiroute", req(d, 1, desc("multiroute", "svcAepBrpc")), ok(50, uMin, 49))
		k.expect("multiroute shares", req(d, 1, desc("multiroute", "svc-x-ep-y-rpc")), ok(50, uMin, 48))
		k.expect("multiroute no match", req(d, 1, desc("multiroute", "svcABCrpc")), noLimit)
		k.expect("midroute", req(d, 1, desc("midroute", "/api/v2")), ok(80, uMin, 79))
		k.expect("midroute shares", req(d, 1, desc("midroute", "/api-beta-v2")), ok(80, uMin, 78))
		k.expect("tenant", req(d, 1, desc("tenant", "t1prod", "resource", "res1v2")), ok(60, uMin, 59))
		k.expect("tenant shares", req(d, 1, desc("tenant", "t2prod", "resource", "resAv2")), ok(60, uMin, 58))
	}},
	// TestBasicConfig of test/config: nested descriptors, key-only
	// defaults, key_value overrides, a value with no limit, depth.
	{"nested descriptors", func(k *conf, _ *gw, _ string) {
		const d = "config-basic"
		k.expect("empty descriptor", req(d, 1, &commonpb.RateLimitDescriptor{}), noLimit)
		k.expect("key1 other value", req(d, 1, desc("key1", "something")), noLimit)
		k.expect("key1_value1 has no limit of its own", req(d, 1, desc("key1", "value1")), noLimit)
		k.expect("key2_value2 deeper than the config", req(d, 1, desc("key2", "value2", "subkey", "subvalue")), noLimit)
		k.expect("key5 child value unknown", req(d, 1, desc("key5", "value5", "subkey5", "subvalue")), noLimit)
		k.expect("subkey1 default", req(d, 1, desc("key1", "value1", "subkey1", "something")), ok(5, uSec, 4))
		k.expect("subkey1 subvalue1", req(d, 1, desc("key1", "value1", "subkey1", "subvalue1")), ok(10, uSec, 9))
		k.expect("key2 default", req(d, 1, desc("key2", "something")), ok(20, uMin, 19))
		k.expect("key2 value2", req(d, 1, desc("key2", "value2")), ok(30, uMin, 29))
		k.expect("key2 value3 allow-listed", req(d, 1, desc("key2", "value3")), noLimit)
		k.countdown("key3", req(d, 1, desc("key3", "foo")), 1, uHour, 1, 2)
		w := ok(1, uDay, 0)
		w.name = "key4_rate_limit"
		k.expect("key4 named", req(d, 1, desc("key4", "foo")), w)
		k.expect("key5 value5", req(d, 1, desc("key5", "value5")), ok(15, uDay, 14))
		k.expect("key5 subvalue5", req(d, 1, desc("key5", "value5", "subkey5", "subvalue5")), ok(25, uDay, 24))
		k.expect("key7 detailed_metric", req(d, 1, desc("key7", "unspecified_value")), ok(70, uMin, 69))
		// Two descriptors at once: each its own answer.
		k.expect("mixed", req(d, 1, desc("key2", "something"), desc("nope", "x"), desc("key2", "value2")), ok(20, uMin, 18), noLimit, ok(30, uMin, 28))
	}},
	// The reference's lookup by "key_value" then "key": an entry a=b
	// finds the rule of key a_b; each descriptor its own counter.
	{"key_value lookup", func(k *conf, _ *gw, _ string) {
		k.expect("a=b", req("quirks", 1, desc("a", "b")), ok(7, uMin, 6))
		k.expect("a_b=x", req("quirks", 1, desc("a_b", "x")), ok(7, uMin, 6))
		k.expect("a_b empty", req("quirks", 1, desc("a_b", "")), ok(7, uMin, 6))
		k.expect("a=c", req("quirks", 1, desc("a", "c")), noLimit)
	}},
	// TestUnlimited (test/service): OK, remaining 2^32-1, no limit, and
	// the other descriptors decided as usual.
	{"unlimited", func(k *conf, _ *gw, _ string) {
		const d = "config-basic"
		k.expect("key6", req(d, 1, desc("key6", "foo")), unlimitedWant)
		k.expect("key6 with key3", req(d, 1, desc("key6", "foo"), desc("key3", "u")), unlimitedWant, ok(1, uHour, 0))
		k.expect("key6 with key3 over", req(d, 1, desc("key6", "foo"), desc("key3", "u")), unlimitedWant, over(1, uHour))
	}},
	// TestShadowModeConfig, TestRuleShadowMode, TestMixedRuleShadowMode:
	// a shadow rule over its limit answers OK with 0 remaining.
	{"shadow mode", func(k *conf, _ *gw, _ string) {
		const d = "config-shadowmode"
		for i := range 22 {
			k.expect(fmt.Sprintf("key2 shadow, call %d", i+1), req(d, 1, desc("key2", "s")), ok(20, uMin, uint32(max(20-(i+1), 0))))
		}
		k.expect("key2 value2 enforced", req(d, 1, desc("key2", "value2")), ok(30, uMin, 29))
		k.expect("mixed: a shadow over, an enforced under", req(d, 1, desc("key2", "s"), desc("key2", "value2")), ok(20, uMin, 0), ok(30, uMin, 28))
		// Per-second limits filled in one call.
		k.expect("subvalue1 shadow, 11 of 10", req(d, 11, desc("key1", "value1", "subkey1", "subvalue1")), ok(10, uSec, 0))
		k.expect("subkey1 enforced, 6 of 5", req(d, 6, desc("key1", "value1", "subkey1", "x")), over(5, uSec))
	}},
	// TestWildcardConfig: prefix, middle and multiple wildcards; each
	// value its own counter (no share_threshold).
	{"wildcards", func(k *conf, _ *gw, _ string) {
		const d = "config-wildcard"
		k.expect("noVal foo1", req(d, 1, desc("noVal", "foo1")), ok(20, uMin, 19))
		k.expect("noVal foo2 apart", req(d, 1, desc("noVal", "foo2")), ok(20, uMin, 19))
		k.expect("wild foo1", req(d, 1, desc("wild", "foo1")), ok(20, uMin, 19))
		k.expect("wild foo1 again", req(d, 1, desc("wild", "foo1")), ok(20, uMin, 18))
		k.expect("wild foo2 apart", req(d, 1, desc("wild", "foo2")), ok(20, uMin, 19))
		k.expect("wild foo (empty run)", req(d, 1, desc("wild", "foo")), ok(20, uMin, 19))
		k.expect("nested wild goo2", req(d, 1, desc("nestedWild", "val1", "wild", "goo2")), ok(20, uMin, 19))
		k.expect("wild bar", req(d, 1, desc("wild", "bar")), noLimit)
		k.expect("noWild foo1 not eager", req(d, 1, desc("noWild", "foo1")), noLimit)
		k.expect("noWild foo", req(d, 1, desc("noWild", "foo")), ok(20, uMin, 19))
		for _, v := range []string{"barab", "bar123b", "barb"} {
			k.expect("midWild "+v, req(d, 1, desc("midWild", v)), ok(20, uMin, 19))
		}
		for _, v := range []string{"bara", "xbarb"} {
			k.expect("midWild "+v, req(d, 1, desc("midWild", v)), noLimit)
		}
		for _, v := range []string{"foo123bar456baz", "foobarbaz"} {
			k.expect("multiWild "+v, req(d, 1, desc("multiWild", v)), ok(10, uMin, 9))
		}
		for _, v := range []string{"foo123baz", "bar456baz"} {
			k.expect("multiWild "+v, req(d, 1, desc("multiWild", v)), noLimit)
		}
	}},
	// rate_limit.replaces: a matched rule drops the rules it names from
	// the call (their status bare OK); alone, the named rule limits.
	{"replaces", func(k *conf, _ *gw, _ string) {
		k.expect("both", req("replaces", 1, desc("user", "u1"), desc("premium", "p1")), noLimit, ok(5, uMin, 4))
		k.expect("both again", req("replaces", 1, desc("user", "u1"), desc("premium", "p1")), noLimit, ok(5, uMin, 3))
		w := func(rem uint32) rlsWant { x := ok(2, uMin, rem); x.name = "per_user"; return x }
		k.expect("user alone", req("replaces", 1, desc("user", "u1")), w(1))
		k.expect("user alone 2", req("replaces", 1, desc("user", "u1")), w(0))
		x := over(2, uMin)
		x.name = "per_user"
		k.expect("user alone over", req("replaces", 1, desc("user", "u1")), x)
		// An unlimited rule named in replaces stays unlimited.
		k.expect("unlimited not replaced", req("replaces", 1, desc("vip", "v"), desc("demote", "d")), unlimitedWant, ok(3, uMin, 2))
	}},
	// hits_addend (utils.GetHitsAddends): the request's, 0 counting as 1;
	// a descriptor's own overrides it, and its 0 checks without counting.
	{"hits_addend", func(k *conf, _ *gw, _ string) {
		const d = "config-basic"
		k.expect("request 0 is 1", req(d, 0, desc("key2", "h")), ok(20, uMin, 19))
		k.expect("request 5", req(d, 5, desc("key2", "h")), ok(20, uMin, 14))
		// key2_value2 has 2 counted already (nested descriptors); the
		// request's 10 applies to it, the descriptor's own 3 to key2.
		k.expect("descriptor 3 over request 10", req(d, 10, withHits(desc("key2", "h"), 3), desc("key2", "value2")), ok(20, uMin, 11), ok(30, uMin, 18))
		k.expect("descriptor 0 checks", req(d, 10, withHits(desc("key2", "h"), 0)), ok(20, uMin, 11))
		k.expect("exactly the rest", req(d, 11, desc("key2", "h")), ok(20, uMin, 0))
		k.expect("one more", req(d, 1, desc("key2", "h")), over(20, uMin))
		// More than the window holds at once: over the limit. The
		// reference counts the 21 (the next call is over too); Tollgate
		// counts no hit denied, so the next call of 1 passes.
		k.expect("21 of 20", req(d, 21, desc("key2", "h2")), over(20, uMin))
		k.expect("after 21 of 20", req(d, 1, desc("key2", "h2")), ok(20, uMin, 19))
		// Near 2^64 and 2^32: over, nothing counted.
		k.expect("descriptor 2^64-1", req(d, 1, withHits(desc("key2", "h2"), math.MaxUint64)), over(20, uMin))
		k.expect("request 2^32-1", req(d, math.MaxUint32, desc("key2", "h2")), over(20, uMin))
		k.expect("after the huge ones", req(d, 1, desc("key2", "h2")), ok(20, uMin, 18))
	}},
	// TestConfigLimitOverride: a descriptor's own limit (Envoy's
	// rate_limits' limit override) replaces whatever the domain's rules
	// say: an enforced fixed window of requests_per_unit per unit, counted
	// by the descriptor's entries and the window, so a new number keeps
	// the count and a new unit starts another. Only an unknown domain
	// ignores it.
	{"request limit", func(k *conf, g *gw, _ string) {
		const d = "config-basic"
		lim := func(ds *commonpb.RateLimitDescriptor, rpu uint32, unit typepb.RateLimitUnit) *commonpb.RateLimitDescriptor {
			ds.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
			return ds
		}
		k.expect("unknown domain", req("foo", 1, lim(desc("key1", "value1"), 10, typepb.RateLimitUnit_DAY)), noLimit)
		sub := func() *commonpb.RateLimitDescriptor { return desc("key1", "value1", "subkey1", "lim") }
		k.expect("10 a day over 5 a second", req(d, 1, lim(sub(), 10, typepb.RateLimitUnit_DAY)), ok(10, uDay, 9))
		k.expect("42 an hour: another window", req(d, 1, lim(sub(), 42, typepb.RateLimitUnit_HOUR)), ok(42, uHour, 41))
		k.expect("42 an hour again", req(d, 1, lim(sub(), 42, typepb.RateLimitUnit_HOUR)), ok(42, uHour, 40))
		k.expect("50 an hour keeps the count", req(d, 1, lim(sub(), 50, typepb.RateLimitUnit_HOUR)), ok(50, uHour, 47))
		k.expect("another value counts apart", req(d, 1, lim(desc("key1", "value1", "subkey1", "lim_else"), 42, typepb.RateLimitUnit_HOUR)), ok(42, uHour, 41))
		// The configured rule's counter is another (5 a second: a fresh
		// value has 4 left whenever it is asked).
		k.expect("the configured rule apart", req(d, 1, sub()), ok(5, uSec, 4))
		// A key no rule names, in a known domain: limited all the same.
		k.countdown("unknown key", req(d, 1, lim(desc("nope", "x"), 2, typepb.RateLimitUnit_MINUTE)), 2, uMin, 2, 3)
		// Never shadow, never unlimited.
		k.countdown("shadow rule", req("config-shadowmode", 1, lim(desc("key2", "lim"), 1, typepb.RateLimitUnit_MINUTE)), 1, uMin, 1, 2)
		k.countdown("unlimited rule", req(d, 1, lim(desc("key6", "lim"), 1, typepb.RateLimitUnit_MINUTE)), 1, uMin, 1, 2)
		k.expect("hits_addend", req(d, 7, lim(desc("key2", "lim"), 10, typepb.RateLimitUnit_MINUTE)), ok(10, uMin, 3))
		k.expect("0 a minute", req(d, 1, lim(desc("key2", "zero"), 0, typepb.RateLimitUnit_MINUTE)), over(0, uMin))
		k.expect("2^32-1 a second", req(d, 1, lim(desc("key2", "huge"), math.MaxUint32, typepb.RateLimitUnit_SECOND)), ok(math.MaxUint32, uSec, math.MaxUint32-1))
		// The type's enum has no WEEK; the reference casts the number to
		// the response's unit, where 7 is WEEK.
		k.expect("week", req(d, 1, lim(desc("key2", "week"), 3, typepb.RateLimitUnit(7))), ok(3, uWeek, 2))
		// UNKNOWN has no window: the reference's process panics on it.
		k.refused("unit UNKNOWN", req(d, 1, lim(desc("key2", "u"), 5, typepb.RateLimitUnit_UNKNOWN)), codes.InvalidArgument)
		k.refused("unit 99", req(d, 1, desc("key2", "ok"), lim(desc("key2", "u"), 5, typepb.RateLimitUnit(99))), codes.InvalidArgument)
		k.expect("nothing counted by the refused calls", req(d, 1, desc("key2", "ok")), ok(20, uMin, 19))
		// The metric names the domain's request limit, never a value.
		m := grepLines(string(adminDo(k.t, g, "GET", "/metrics", "").Body), "tollgate_rls_descriptors_total")
		if !strings.Contains(m, `descriptor="config-basic.(request limit)"`) || strings.Contains(m, "lim_else") {
			k.t.Fatalf("metrics:\n%s", m)
		}
		// /admin/top knows the domain's request limits by that name: two
		// descriptors denied (the unknown key and the unlimited rule's).
		tr := adminDo(k.t, g, "GET", "/admin/top?limit=config-basic.(request%20limit)", "")
		var top topBody
		if tr.Status != 200 || json.Unmarshal(tr.Body, &top) != nil || top.Denied.Total != 2 || len(top.Denied.Clients) != 2 {
			k.t.Fatalf("/admin/top: %s", tr)
		}
	}},
	// response_dynamic_metadata (ratelimitToMetadata, the reference's
	// TestMetadata* tests): the domain, each descriptor's entries ("k=v"),
	// its own limit and hits_addend, the request's hits_addend when not 0,
	// and the metadata of the rules of the descriptors not over their
	// limit, merged (the first value of a name wins, mappings merged).
	{"dynamic metadata", func(k *conf, _ *gw, _ string) {
		meta := func(what string, resp *rlpb.RateLimitResponse, want map[string]any) {
			k.t.Helper()
			w, err := structpb.NewStruct(want)
			if err != nil {
				k.t.Fatal(err)
			}
			if !proto.Equal(resp.GetDynamicMetadata(), w) {
				k.t.Fatalf("%s: dynamic_metadata\n%v\nwant\n%v", what, resp.GetDynamicMetadata(), w)
			}
		}
		entries := func(kv ...string) map[string]any {
			l := make([]any, len(kv))
			for i, e := range kv {
				l[i] = e
			}
			return map[string]any{"entries": l}
		}
		r := k.expect("both pass", req("metadata-merge", 0, desc("a", "1"), desc("b", "1")), ok(1, uMin, 0), ok(10, uMin, 9))
		meta("both pass", r, map[string]any{"domain": "metadata-merge",
			"descriptors": []any{entries("a=1"), entries("b=1")},
			"metadata": map[string]any{"name": "service_1", "team": map[string]any{"owner": "alice", "pager": "bob"},
				"other": "x", "tags": []any{1, true, nil, 2.5}}})
		r = k.expect("a over", req("metadata-merge", 1, desc("a", "1"), desc("b", "1")), over(1, uMin), ok(10, uMin, 9))
		meta("a over", r, map[string]any{"domain": "metadata-merge", "hitsAddend": 1,
			"descriptors": []any{entries("a=1"), entries("b=1")},
			"metadata":    map[string]any{"name": "service_2", "team": map[string]any{"pager": "bob"}, "other": "x", "tags": []any{1, true, nil, 2.5}}})
		// The merge left the configuration as it was.
		r = k.expect("a alone", req("metadata-merge", 0, desc("a", "2")), ok(1, uMin, 0))
		meta("a alone", r, map[string]any{"domain": "metadata-merge", "descriptors": []any{entries("a=2")},
			"metadata": map[string]any{"name": "service_1", "team": map[string]any{"owner": "alice"}}})
		r = k.expect("b alone", req("metadata-merge", 0, desc("b", "2")), ok(10, uMin, 9))
		meta("b alone", r, map[string]any{"domain": "metadata-merge", "descriptors": []any{entries("b=2")},
			"metadata": map[string]any{"name": "service_2", "team": map[string]any{"pager": "bob"}, "other": "x", "tags": []any{1, true, nil, 2.5}}})
		// The reference's metadata.yaml; a descriptor's own limit and
		// hits_addend; no rule, no metadata.
		d := withHits(desc("key2", "m"), 3)
		d.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typepb.RateLimitUnit_MINUTE}
		r = k.expect("metadata.yaml", req("config-metadata", 0, desc("key1", "value1", "subkey1", "x"), desc("key2", "m"), d, desc("nope", "n")),
			ok(5, uSec, 4), ok(20, uMin, 19), ok(5, uMin, 2), noLimit)
		limited := entries("key2=m")
		limited["limit"] = "requests_per_unit:5 unit:MINUTE"
		limited["hitsAddend"] = 3
		meta("metadata.yaml", r, map[string]any{"domain": "config-metadata",
			"descriptors": []any{entries("key1=value1", "subkey1=x"), entries("key2=m"), limited, entries("nope=n")},
			"metadata":    map[string]any{"name": "service_1", "service_with_quota": map[string]any{"name": "service_2"}}})
		// Nothing passed, nothing of the rules'.
		r = k.expect("unknown domain", req("foo", 0, desc("k", "v")), noLimit)
		meta("unknown domain", r, map[string]any{"domain": "foo", "descriptors": []any{entries("k=v")}})
	}},
	// testBasicBaseConfig / TestEmptyDomain / TestEmptyDescriptors: the
	// reference answers these with an error (gRPC UNKNOWN); Tollgate says
	// INVALID_ARGUMENT.
	{"empty domain, no descriptors", func(k *conf, _ *gw, _ string) {
		k.refused("empty domain", req("", 1, desc("key1", "x")), codes.InvalidArgument)
		k.refused("no descriptors", req("basic", 1), codes.InvalidArgument)
	}},
	// testConfigReload: a domain added by a new file answers after a
	// reload (the reference watches its directory; Tollgate reads the
	// files again on reload). reload.yaml's block, 0 a second, denies.
	{"reload", func(k *conf, g *gw, dir string) {
		k.expect("block before", req("reload", 1, desc("block", "foo")), noLimit)
		data, err := os.ReadFile(filepath.Join("testdata", "rlsconf", "reload.yaml.later"))
		if err != nil {
			k.t.Fatal(err)
		}
		writeFileAtomic(k.t, filepath.Join(dir, "reload.yaml"), data)
		if r := adminDo(k.t, g, "POST", "/admin/reload", ""); r.Status != 200 {
			k.t.Fatalf("reload: %s", r)
		}
		k.expect("key1 after", req("reload", 1, desc("key1", "foo")), ok(50, uSec, 49))
		k.expect("block after", req("reload", 1, desc("block", "foo")), over(0, uSec))
		k.countdown("one_per_minute", req("reload", 1, desc("one_per_minute", "x")), 1, uMin, 1, 2)
	}},
}

// rlsConformanceStore starts a store and returns the [store] tables
// naming it.
type rlsConformanceStore struct {
	name  string
	start func(t *testing.T) string
}

var rlsConformanceStores = []rlsConformanceStore{
	{"memory", func(*testing.T) string { return "" }},
	{"redis", func(t *testing.T) string {
		rs := redistest.Standalone(t)
		return rlsRedisStore(fmt.Sprintf("url = \"redis://%s/0\"", rs.Addr))
	}},
	{"sentinel", func(t *testing.T) string {
		g := redistest.Sentinel(t)
		return rlsRedisStore(fmt.Sprintf("sentinel = { master = %q, addrs = [\"%s\"] }", g.Name, strings.Join(g.SentinelAddrs(), `", "`)))
	}},
	{"cluster", func(t *testing.T) string {
		cl := redistest.Cluster(t)
		return rlsRedisStore(fmt.Sprintf("cluster = [\"%s\"]", strings.Join(cl.Addrs(), `", "`)))
	}},
}

func rlsRedisStore(conn string) string {
	return "\n[store]\nbackend = \"redis\"\non_error = \"deny\"\ntimeout = \"2s\"\nclock = \"local\"\n\n[store.redis]\nprefix = \"conf:\"\n" + conn + "\n"
}

// TestRLSConformance runs envoyproxy/ratelimit's scenarios on every
// store.
func TestRLSConformance(t *testing.T) {
	t.Parallel()
	for _, st := range rlsConformanceStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			store := st.start(t)
			dir := t.TempDir()
			src := filepath.Join("testdata", "rlsconf")
			files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
			if err != nil || len(files) == 0 {
				t.Fatalf("fixtures: %v %v", files, err)
			}
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				writeFileAtomic(t, filepath.Join(dir, filepath.Base(f)), data)
			}
			g := startGateway(t, "rls_conformance.toml.tmpl", gwOpts{Data: map[string]any{"Dir": dir, "Store": store},
				FreshPorts: []string{"RLS"}, Env: []string{clockSkewEnv + "=" + noonOffset().String()}})
			k := &conf{t: t, c: dialRLS(t, g.Port("RLS"))}
			for _, sc := range rlsScenarios {
				k.t.Logf("scenario %s", sc.name)
				sc.run(k, g, dir)
			}
		})
	}
}

// TestRLSConformanceRefused: the reference's fixtures of invalid
// configuration are refused by `gateway validate`, with the file, the
// YAML path and the reference's own message.
func TestRLSConformanceRefused(t *testing.T) {
	t.Parallel()
	src := filepath.Join("testdata", "rlsconf", "refused")
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{[]string{"bad_limit_unit.yaml"}, "descriptors[0].rate_limit.unit: invalid rate limit unit 'foo'"},
		{[]string{"bad_yaml.yaml"}, "not YAML: line 2: found unexpected end of stream"},
		{[]string{"duplicate_key.yaml"}, "descriptors[1]: duplicate descriptor composite key 'test-domain.key1_value1'"},
		{[]string{"empty_domain.yaml"}, "config file cannot have empty domain"},
		{[]string{"empty_key.yaml"}, "descriptors[0].key: descriptor has empty key"},
		{[]string{"misspelled_key.yaml"}, "descriptors[0].ratelimit: config error, unknown key 'ratelimit'"},
		{[]string{"misspelled_key2.yaml"}, "config error, unknown key 'requestsperunit'"},
		{[]string{"non_map_list.yaml"}, "descriptors[0]: config error, yaml file contains list of type other than map"},
		{[]string{"non_string_key.yaml"}, "config error, key is not of type string"},
		{[]string{"replaces_empty.yaml"}, "replaces[0].name: should not have an empty replaces entry"},
		{[]string{"replaces_self.yaml"}, "replaces[0].name: replaces should not contain name of same descriptor"},
		{[]string{"unlimited_with_unit.yaml"}, "should not specify rate limit unit when unlimited"},
		// Two files of one domain: the reference merges them only with
		// MERGE_DOMAIN_CONFIG, which Tollgate does not read.
		{[]string{"duplicate_domain.yaml", "merge_domain_key1.yaml"}, "duplicate domain 'test-domain' in config file"},
		{[]string{"merge_domain_key1.yaml", "merge_domain_key2.yaml"}, "duplicate domain 'test-domain' in config file"},
	} {
		t.Run(tc.files[0], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, f := range tc.files {
				data, err := os.ReadFile(filepath.Join(src, f))
				if err != nil {
					t.Fatal(err)
				}
				writeFileAtomic(t, filepath.Join(dir, f), data)
			}
			cfg := filepath.Join(dir, "gateway.toml")
			writeFileAtomic(t, cfg, []byte("[rls]\nlisten = \"127.0.0.1:0\"\nenvoy_config = [\"*.yaml\"]\n"))
			code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg)
			if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, ".yaml: ") {
				t.Fatalf("exit %d, want 2 naming %q\n%s%s", code, tc.want, stdout, stderr)
			}
		})
	}
}
