package rls

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/rls/envoyconf"
)

const hostileYAML = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: user
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 1000000}
`

func newTestServer(t testing.TB, maxKeys int) (*Server, *memstore.Store) {
	t.Helper()
	cfg, err := envoyconf.Load([]envoyconf.File{{Name: "edge.yaml", Data: []byte(hostileYAML)}})
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(memstore.Options{MaxKeys: maxKeys})
	t.Cleanup(func() { mem.Close() })
	clock := time.Unix(1_800_000_030, 0) // 30 s into a minute
	s, err := New(Options{Store: mem, Local: mem, Now: func() time.Time { return clock }}, Snapshot{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return s, mem
}

func entryDesc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestHostileRequests: requests built to cost memory or time get a
// defined answer, and the store holds no more than its bound whatever
// values they carry.
func TestHostileRequests(t *testing.T) {
	huge := strings.Repeat("v", 1<<20)
	deep := make([]string, 0, 2*(MaxEntries+1))
	for range MaxEntries + 1 {
		deep = append(deep, "user", "x")
	}
	many := make([]*commonpb.RateLimitDescriptor, MaxDescriptors+1)
	for i := range many {
		many[i] = entryDesc("remote_address", "a")
	}
	cases := []struct {
		name string
		req  *rlpb.RateLimitRequest
		code codes.Code // refused with it, or codes.OK
		want rlpb.RateLimitResponse_Code
	}{
		{"too many descriptors", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: many}, codes.InvalidArgument, 0},
		{"a descriptor too deep", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{entryDesc(deep...)}}, codes.InvalidArgument, 0},
		{"empty domain", &rlpb.RateLimitRequest{Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "a")}}, codes.InvalidArgument, 0},
		{"no descriptors", &rlpb.RateLimitRequest{Domain: "edge"}, codes.InvalidArgument, 0},
		{"a 1 MiB value", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", huge)}}, codes.OK, rlpb.RateLimitResponse_OK},
		{"a 1 MiB domain", &rlpb.RateLimitRequest{Domain: huge, Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "a")}}, codes.OK, rlpb.RateLimitResponse_OK},
		{"a 1 MiB key", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{entryDesc(huge, "a")}}, codes.OK, rlpb.RateLimitResponse_OK},
		{"hits_addend 2^32-1", &rlpb.RateLimitRequest{Domain: "edge", HitsAddend: 1<<32 - 1, Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "b")}}, codes.OK, rlpb.RateLimitResponse_OVER_LIMIT},
		{"a descriptor's hits_addend 2^64-1", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{withAddend(entryDesc("remote_address", "b"), 1<<64-1)}}, codes.OK, rlpb.RateLimitResponse_OVER_LIMIT},
		{"a descriptor's hits_addend 2^63", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{withAddend(entryDesc("remote_address", "b"), 1<<63)}}, codes.OK, rlpb.RateLimitResponse_OVER_LIMIT},
		{"a descriptor's hits_addend 2^53+1", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{withAddend(entryDesc("remote_address", "b"), 1<<53+1)}}, codes.OK, rlpb.RateLimitResponse_OVER_LIMIT},
		{"the largest descriptor list", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: many[:MaxDescriptors]}, codes.OK, rlpb.RateLimitResponse_OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, mem := newTestServer(t, 1000)
			resp, err := s.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("err %v, want %v", err, tc.code)
			}
			if err == nil && resp.GetOverallCode() != tc.want {
				t.Fatalf("answered %v, want %v", resp.GetOverallCode(), tc.want)
			}
			if mem.Bytes() > 1<<20 {
				t.Fatalf("store holds %d bytes after one call", mem.Bytes())
			}
			if err == nil && resp.GetOverallCode() == rlpb.RateLimitResponse_OVER_LIMIT {
				// Denied: nothing counted, one more still passes.
				again, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: tc.req.GetDomain(), Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "b")}})
				if err != nil || again.GetStatuses()[0].GetLimitRemaining() != 999_999 {
					t.Fatalf("after the denied call: %v %v", again, err)
				}
			}
		})
	}

	// Many distinct values: the store keeps at most its bound of keys.
	s, mem := newTestServer(t, 1000)
	for i := range 20000 {
		req := &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{
			entryDesc("remote_address", fmt.Sprint("10.", i)), entryDesc("user", fmt.Sprint(i), "path", "/p")}}
		if _, err := s.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := mem.Len(); n > 1000 {
		t.Fatalf("store holds %d keys, bound 1000", n)
	}
}

// TestResponse checks one call's answer against values worked out by
// hand: 30 s into a minute, a limit of 10⁶ a minute with 1 hit used.
func TestResponse(t *testing.T) {
	s, _ := newTestServer(t, 1000)
	resp, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: "edge",
		Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "a"), entryDesc("user", "u", "path", "/p"), entryDesc("user", "u")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		remaining uint32
		reset     time.Duration
		limited   bool
	}{{999_999, 30 * time.Second, true}, {999_999, 30 * time.Second, true}, {0, 0, false}}
	for i, w := range want {
		st := resp.GetStatuses()[i]
		if st.GetCode() != rlpb.RateLimitResponse_OK || (st.GetCurrentLimit() != nil) != w.limited ||
			st.GetLimitRemaining() != w.remaining || st.GetDurationUntilReset().AsDuration() != w.reset {
			t.Fatalf("status %d: %v, want remaining %d reset %v", i, st, w.remaining, w.reset)
		}
	}
}

// TestCandidateBesideLive: a candidate's rules decide every call on
// their own store and never change the answer; with every candidate
// slot busy a call decides its candidate before it is answered (nothing
// is dropped).
func TestCandidateBesideLive(t *testing.T) {
	s, _ := newTestServer(t, 1000)
	cfg, err := envoyconf.Load([]envoyconf.File{{Name: "cand.yaml", Data: []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")}})
	if err != nil {
		t.Fatal(err)
	}
	cmem := memstore.New(memstore.Options{MaxKeys: 100})
	defer cmem.Close()
	var got []CandidateOutcome
	s.SetCandidate(&Candidate{Config: cfg, Store: cmem, Record: func(o *CandidateOutcome) {
		c := *o
		c.LiveDenied, c.CandidateDenied = append([]string(nil), o.LiveDenied...), append([]string(nil), o.CandidateDenied...)
		got = append(got, c)
	}})
	for range maxCandidateInFlight {
		s.candSem <- struct{}{} // every slot busy: decided in line
	}
	for i := range 3 {
		resp, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: "edge",
			Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "a"), entryDesc("nope", "x")}})
		if err != nil || resp.GetOverallCode() != rlpb.RateLimitResponse_OK {
			t.Fatalf("call %d: %v %v: the candidate changed the answer", i+1, resp, err)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d outcomes recorded, want 3", len(got))
	}
	for i, o := range got {
		denied := strings.Join(o.CandidateDenied, ",")
		if len(o.LiveDenied) != 0 || (i == 0) != (denied == "") || (i > 0 && (denied != "edge.remote_address" || o.Descriptor != "remote_address=a")) {
			t.Fatalf("outcome %d: %+v", i+1, o)
		}
	}
	s.SetCandidate(nil)
	if _, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: "edge",
		Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "a")}}); err != nil || len(got) != 3 {
		t.Fatalf("after SetCandidate(nil): %v, %d outcomes", err, len(got))
	}
}

func limited(d *commonpb.RateLimitDescriptor, rpu uint32, unit typepb.RateLimitUnit) *commonpb.RateLimitDescriptor {
	d.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

// TestRequestLimitHostile: a descriptor's own limit comes from the
// caller, so every number and unit it may carry gets a defined answer,
// and callers varying it cannot grow the kept rules or metric labels.
func TestRequestLimitHostile(t *testing.T) {
	huge := strings.Repeat("v", 1<<20)
	cases := []struct {
		name      string
		req       *rlpb.RateLimitRequest
		code      codes.Code
		want      rlpb.RateLimitResponse_Code
		remaining uint32
	}{
		{"unit UNKNOWN", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", "a"), 5, typepb.RateLimitUnit_UNKNOWN)}}, codes.InvalidArgument, 0, 0},
		{"unit 8", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", "a"), 5, 8)}}, codes.InvalidArgument, 0, 0},
		{"unit -1", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", "a"), 5, -1)}}, codes.InvalidArgument, 0, 0},
		{"a bad unit on an unknown domain", &rlpb.RateLimitRequest{Domain: "nowhere", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("k", "a"), 5, 99)}}, codes.InvalidArgument, 0, 0},
		{"2^32-1 a second", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", "a"), 1<<32-1, typepb.RateLimitUnit_SECOND)}}, codes.OK, rlpb.RateLimitResponse_OK, 1<<32 - 2},
		{"0 a year", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", "a"), 0, typepb.RateLimitUnit_YEAR)}}, codes.OK, rlpb.RateLimitResponse_OVER_LIMIT, 0},
		{"an unknown key", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("nope", "a"), 3, typepb.RateLimitUnit_MINUTE)}}, codes.OK, rlpb.RateLimitResponse_OK, 2},
		{"no entries", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc(), 3, typepb.RateLimitUnit_MINUTE)}}, codes.OK, rlpb.RateLimitResponse_OK, 2},
		{"an unknown domain", &rlpb.RateLimitRequest{Domain: "nowhere", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("nope", "a"), 3, typepb.RateLimitUnit_MINUTE)}}, codes.OK, rlpb.RateLimitResponse_OK, 0},
		{"a 1 MiB value", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", huge), 3, typepb.RateLimitUnit_MINUTE)}}, codes.OK, rlpb.RateLimitResponse_OK, 2},
		{"hits_addend 2^64-1", &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{withAddend(limited(entryDesc("remote_address", "a"), 1<<32-1, typepb.RateLimitUnit_SECOND), 1<<64-1)}}, codes.OK, rlpb.RateLimitResponse_OVER_LIMIT, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, mem := newTestServer(t, 1000)
			resp, err := s.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("err %v, want %v", err, tc.code)
			}
			if err != nil {
				if mem.Len() != 0 {
					t.Fatalf("a refused call counted: %d keys", mem.Len())
				}
				return
			}
			if st := resp.GetStatuses()[0]; resp.GetOverallCode() != tc.want || st.GetLimitRemaining() != tc.remaining {
				t.Fatalf("answered %v, want %v with %d remaining", resp, tc.want, tc.remaining)
			}
		})
	}

	// Callers sending every number: the config keeps at most
	// MaxRequestRules rules, and the metric one label set per domain and
	// code.
	s, _ := newTestServer(t, 1000)
	for i := range 3 * envoyconf.MaxRequestRules {
		req := &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{limited(entryDesc("remote_address", "a"), uint32(i+1), typepb.RateLimitUnit_HOUR)}}
		if _, err := s.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	snap := s.cur.Load()
	if n := snap.Config.RequestRules(); n != envoyconf.MaxRequestRules {
		t.Fatalf("%d request rules kept, want the bound %d", n, envoyconf.MaxRequestRules)
	}
}

func withAddend(d *commonpb.RateLimitDescriptor, n uint64) *commonpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// TestRequestLimitCounts: a descriptor's own limit counts by its
// entries and unit, apart from the configured rule: worked out by hand,
// 30 s into a minute.
func TestRequestLimitCounts(t *testing.T) {
	s, _ := newTestServer(t, 1000)
	call := func(d *commonpb.RateLimitDescriptor) *rlpb.RateLimitResponse_DescriptorStatus {
		t.Helper()
		resp, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatuses()[0]
	}
	for i, want := range []uint32{2, 1, 0} {
		st := call(limited(entryDesc("remote_address", "a"), 3, typepb.RateLimitUnit_MINUTE))
		if st.GetCode() != rlpb.RateLimitResponse_OK || st.GetLimitRemaining() != want || st.GetCurrentLimit().GetRequestsPerUnit() != 3 ||
			st.GetCurrentLimit().GetUnit() != rlpb.RateLimitResponse_RateLimit_MINUTE || st.GetDurationUntilReset().AsDuration() != 30*time.Second {
			t.Fatalf("call %d: %v", i+1, st)
		}
	}
	if st := call(limited(entryDesc("remote_address", "a"), 3, typepb.RateLimitUnit_MINUTE)); st.GetCode() != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("4th: %v", st)
	}
	// 5 a minute: the same counter (3 used), 2 left after this one... 1.
	if st := call(limited(entryDesc("remote_address", "a"), 5, typepb.RateLimitUnit_MINUTE)); st.GetLimitRemaining() != 1 {
		t.Fatalf("5 a minute: %v", st)
	}
	// An hour: another counter.
	if st := call(limited(entryDesc("remote_address", "a"), 5, typepb.RateLimitUnit_HOUR)); st.GetLimitRemaining() != 4 {
		t.Fatalf("5 an hour: %v", st)
	}
	// The configured rule (10⁶ a minute) counts apart.
	if st := call(entryDesc("remote_address", "a")); st.GetLimitRemaining() != 999_999 {
		t.Fatalf("configured: %v", st)
	}
}

// TestDynamicMetadataOff: without Snapshot.DynamicMetadata, as the
// reference without RESPONSE_DYNAMIC_METADATA, no answer carries any;
// with it, a 1 MiB value is repeated once, never more.
func TestDynamicMetadataOff(t *testing.T) {
	s, _ := newTestServer(t, 1000)
	huge := strings.Repeat("v", 1<<20)
	req := &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", huge)}}
	resp, err := s.ShouldRateLimit(context.Background(), req)
	if err != nil || resp.GetDynamicMetadata() != nil {
		t.Fatalf("off: %v %v", resp.GetDynamicMetadata() != nil, err)
	}
	snap := s.cur.Load().Snapshot
	snap.DynamicMetadata = true
	s.Swap(snap)
	resp, err = s.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(resp); n < 1<<20 || n > 1<<20+1024 {
		t.Fatalf("answer of %d bytes for a request of %d", n, proto.Size(req))
	}
}

// TestCandidateMatchesAsLive: a candidate configuration matches a call
// exactly as the live one does: a descriptor's own limit applies in the
// candidate's domain, and an unlimited rule another rule replaces stays
// unlimited there too.
func TestCandidateMatchesAsLive(t *testing.T) {
	s, _ := newTestServer(t, 1000)
	cfg, err := envoyconf.Load([]envoyconf.File{{Name: "cand.yaml", Data: []byte(`domain: edge
descriptors:
  - key: free
    rate_limit: {unlimited: true, name: free}
  - key: tight
    rate_limit: {unit: minute, requests_per_unit: 1, replaces: [{name: free}]}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	cmem := memstore.New(memstore.Options{MaxKeys: 100})
	defer cmem.Close()
	var got [][]string
	s.SetCandidate(&Candidate{Config: cfg, Store: cmem, Record: func(o *CandidateOutcome) {
		got = append(got, append([]string(nil), o.CandidateDenied...))
	}})
	for range maxCandidateInFlight {
		s.candSem <- struct{}{} // every slot busy: decided in line
	}
	call := func(ds ...*commonpb.RateLimitDescriptor) {
		t.Helper()
		if _, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: "edge", Descriptors: ds}); err != nil {
			t.Fatal(err)
		}
	}
	// A descriptor's own limit of 1 a minute on a key the candidate has
	// no rule for: the second call is over it.
	call(limited(entryDesc("nope", "x"), 1, typepb.RateLimitUnit_MINUTE))
	call(limited(entryDesc("nope", "x"), 1, typepb.RateLimitUnit_MINUTE))
	// An unlimited rule named in another matched rule's replaces stays
	// unlimited; the replacing rule allows its first call.
	call(entryDesc("free", "a"), entryDesc("tight", "a"))
	want := []string{"", "edge.(request limit)", ""}
	if len(got) != len(want) {
		t.Fatalf("%d outcomes, want %d", len(got), len(want))
	}
	for i, w := range want {
		if d := strings.Join(got[i], ","); !strings.HasPrefix(d, w) || (w == "" && d != "") {
			t.Errorf("call %d: candidate denied %q, want %q", i+1, d, w)
		}
	}
}
