package replay

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

// base is aligned to 10 s, so fixed windows and counter buckets of 10 s
// start at base.
var base = time.Unix(1_700_000_000, 0).UTC()

// testPolicy has an exact limit of 3 per 10 s per client on every route,
// a sliding counter of 1 per 10 s per client on route "api" (host
// api.example.com, /v1), and a shadow fixed window of 2 per 10 s.
func testPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	c := config.Default()
	exact := config.DefaultLimit()
	exact.Name, exact.Rates, exact.Algorithm = "per-client", []string{"3/10s"}, "sliding_window_log"
	counter := config.DefaultLimit()
	counter.Name, counter.Rates = "api-counter", []string{"1/10s"}
	shadow := config.DefaultLimit()
	shadow.Name, shadow.Rates, shadow.Algorithm, shadow.Mode = "watch", []string{"2/10s"}, "fixed_window", "shadow"
	c.Limits = []config.LimitConfig{exact, counter, shadow}
	c.Gateway.Limits = []string{"per-client"}
	web := config.DefaultRoute()
	web.Name, web.PathPrefix, web.Upstream = "web", "/web", "http://127.0.0.1:1"
	api := config.DefaultRoute()
	api.Name, api.Host, api.PathPrefix, api.Upstream = "api", "api.example.com", "/v1", "http://127.0.0.1:1"
	api.Limits = []string{"api-counter", "watch"}
	c.Routes = []config.RouteConfig{web, api}
	return compile(t, c)
}

// compile compiles c with no environment, reading files from disk.
func compile(t testing.TB, c config.Config) *policy.Policy {
	t.Helper()
	p, err := policy.Compile(c, func(string) string { return "" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// replayEachFormat writes es in each access-log format and replays the
// log against p, one subtest per format, handing check its report.
func replayEachFormat(t *testing.T, p *policy.Policy, es []accesslog.Entry, check func(t *testing.T, rep *Report)) {
	t.Helper()
	for _, f := range []accesslog.Format{accesslog.Combined, accesslog.JSONL} {
		t.Run(f.String(), func(t *testing.T) {
			rep, err := Run(context.Background(), p, bytes.NewReader(writeLog(t, f, es)), Options{Format: f})
			if err != nil {
				t.Fatal(err)
			}
			check(t, rep)
		})
	}
}

// writeLog writes entries in format f, hashing identities as the gateway
// does by default.
func writeLog(t testing.TB, f accesslog.Format, es []accesslog.Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := accesslog.NewWriter(&buf, accesslog.Options{Format: f, Salt: []byte("salt")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range es {
		w.Log(&es[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func entry(at time.Duration, ip, apiKey, route, path string) accesslog.Entry {
	e := accesslog.Entry{Time: base.Add(at), IP: ip, Method: "GET", Path: path, Proto: "HTTP/1.1",
		Status: 200, Route: route, Client: ip, ClientKind: "ip"}
	if apiKey != "" {
		e.APIKey, e.Client, e.ClientKind = apiKey, apiKey, "api_key"
	}
	return e
}

// knownLog: three IP clients send 10 requests each in the first second
// (3 allowed, 7 denied each by per-client), then 2 each at 20 s (allowed);
// two API-key clients sharing one IP send 4 each (3 + 3 allowed: keys are
// separate buckets); one request matches no route.
func knownLog() []accesslog.Entry {
	var es []accesslog.Entry
	for i := range 10 {
		for _, ip := range []string{"198.51.100.1", "198.51.100.2", "2001:db8::1"} {
			es = append(es, entry(time.Duration(i)*50*time.Millisecond, ip, "", "web", "/web/x"))
		}
	}
	for i := range 2 {
		for _, ip := range []string{"198.51.100.1", "198.51.100.2", "2001:db8::1"} {
			es = append(es, entry(20*time.Second+time.Duration(i)*time.Millisecond, ip, "", "web", "/web/y"))
		}
	}
	for i := range 4 {
		for _, key := range []string{"key-one", "key-two"} {
			es = append(es, entry(30*time.Second+time.Duration(i)*time.Millisecond, "203.0.113.9", key, "web", "/web/z"))
		}
	}
	es = append(es, entry(40*time.Second, "198.51.100.1", "", "", "/nowhere"))
	return es
}

func limitReport(t *testing.T, rep *Report, name string) *LimitReport {
	t.Helper()
	for _, l := range rep.Limits {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no report for limit %q", name)
	return nil
}

func TestRunKnownCounts(t *testing.T) {
	replayEachFormat(t, testPolicy(t), knownLog(), func(t *testing.T, rep *Report) {
		if rep.Requests != 45 || rep.Malformed != 0 || rep.Lines != 45 {
			t.Errorf("requests %d, malformed %d, lines %d; want 45, 0, 45", rep.Requests, rep.Malformed, rep.Lines)
		}
		pc := limitReport(t, rep, "per-client")
		want := LimitReport{Name: "per-client", Algorithm: ratelimit.SlidingWindowLog, Requests: 44, Allowed: 9 + 6 + 6,
			Denied: 21 + 2, PeakUsed: 3, PeakLimit: 3}
		if *pc != want {
			t.Errorf("per-client:\n got %+v\nwant %+v", *pc, want)
		}
		if got := rep.Outcomes[proxy.OutcomeForwarded]; got != 21 {
			t.Errorf("forwarded %d, want 21", got)
		}
		if got := rep.Outcomes[proxy.OutcomeLimited]; got != 23 {
			t.Errorf("limited %d, want 23", got)
		}
		if got := rep.Outcomes[proxy.OutcomeNoRoute]; got != 1 {
			t.Errorf("no_route %d, want 1", got)
		}
		if !rep.First.Equal(base) || !rep.Last.Equal(base.Add(40*time.Second)) {
			t.Errorf("span %s..%s, want %s..+40s", rep.First, rep.Last, base)
		}
	})
}

// TestRunCounterAgainstExact replays the known disagreement of a two-bucket
// counter (1 per 10 s): hits at 9 s (allowed), 10 s (denied, rightly) and
// 19.5 s (denied: 0.05 of bucket 0 still weighs, although its unit at 9 s
// has left the real window), then 20 s (allowed). The shadow fixed window of
// 2 per 10 s never denies.
func TestRunCounterAgainstExact(t *testing.T) {
	var es []accesslog.Entry
	for _, at := range []time.Duration{9 * time.Second, 10 * time.Second, 19500 * time.Millisecond, 20 * time.Second} {
		e := entry(at, "198.51.100.7", "", "api", "/v1/items")
		es = append(es, e)
	}
	rep, err := Run(context.Background(), testPolicy(t), bytes.NewReader(writeLog(t, accesslog.Combined, es)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := limitReport(t, rep, "api-counter")
	if !c.Compared || c.Requests != 4 || c.Allowed != 2 || c.Denied != 2 || c.FalseAllows != 0 || c.FalseDenies != 1 {
		t.Errorf("api-counter: %+v; want compared, 4 requests, 2 allowed, 2 denied, 0 false allows, 1 false deny", *c)
	}
	if pc := limitReport(t, rep, "per-client"); pc.Compared || pc.Requests != 4 || pc.Allowed != 4 {
		t.Errorf("per-client: %+v; want 4 requests allowed, not compared (exact)", *pc)
	}
	w := limitReport(t, rep, "watch")
	if !w.Shadow || w.Requests != 4 || w.Allowed != 4 {
		t.Errorf("watch: %+v; want shadow, 4 requests, 4 allowed", *w)
	}
	var out strings.Builder
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"api-counter", "0 false allows, 1 false denies (25.0000%)", "shadow", "exact"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

func TestRunReportsMalformedLines(t *testing.T) {
	good := writeLog(t, accesslog.Combined, knownLog())
	lines := strings.SplitAfter(string(good), "\n")
	var in strings.Builder
	var bad []int
	n := 0
	for i, l := range lines {
		if l == "" {
			continue
		}
		if i%10 == 3 {
			n++
			in.WriteString("this is not an access log line\n")
			bad = append(bad, n)
		}
		n++
		in.WriteString(l)
	}
	var errs bytes.Buffer
	rep, err := Run(context.Background(), testPolicy(t), strings.NewReader(in.String()), Options{Errors: &errs})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Malformed != len(bad) || rep.Requests != 45 {
		t.Errorf("malformed %d, requests %d; want %d, 45", rep.Malformed, rep.Requests, len(bad))
	}
	for _, ln := range bad {
		if !strings.Contains(errs.String(), fmt.Sprintf("line %d: ", ln)) {
			t.Errorf("stderr does not report line %d:\n%s", ln, errs.String())
		}
	}
	// The good lines still replay to the same counts.
	if pc := limitReport(t, rep, "per-client"); pc.Allowed != 21 || pc.Denied != 23 {
		t.Errorf("per-client %+v; want 21 allowed, 23 denied", *pc)
	}
}

func TestRunCapsMalformedOutput(t *testing.T) {
	in := strings.Repeat("garbage\n", 30)
	var errs bytes.Buffer
	rep, err := Run(context.Background(), testPolicy(t), strings.NewReader(in), Options{Errors: &errs, MaxReported: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Malformed != 30 || rep.Requests != 0 {
		t.Errorf("malformed %d, requests %d; want 30, 0", rep.Malformed, rep.Requests)
	}
	got := strings.Count(errs.String(), "\n")
	if got != 6 || !strings.Contains(errs.String(), "and 25 more malformed lines (30 in all)") {
		t.Errorf("stderr has %d lines, want 5 reports and one summary:\n%s", got, errs.String())
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	log := writeLog(t, accesslog.JSONL, knownLog())
	if _, err := Run(ctx, testPolicy(t), bytes.NewReader(log), Options{}); err == nil {
		t.Error("cancelled context: want an error")
	}
}

func TestSyntheticAddressesAreDistinct(t *testing.T) {
	b := newBuilder(testPolicy(t))
	seen := map[string]string{}
	for i := range 1000 {
		h := accesslog.Hash(nil, "ip", fmt.Sprint(i))
		a := b.ip(&accesslog.Entry{IP: h})
		net64 := netip.PrefixFrom(netip.MustParseAddr(a), 64).Masked().String()
		if prev, ok := seen[net64]; ok {
			t.Fatalf("hashes %s and %s share the /64 %s", prev, h, net64)
		}
		seen[net64] = h
		if b.ip(&accesslog.Entry{IP: h}) != a {
			t.Fatal("the same hash must map to the same address")
		}
	}
}
