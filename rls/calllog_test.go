package rls

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/rls/envoyconf"
)

// callRecord is what one logged call said, copied (a CallLogger may not
// keep the Call).
type callRecord struct {
	overall rlpb.RateLimitResponse_Code
	codes   []string
	byValue [][]bool
	err     bool
}

type callRecorder struct{ calls []callRecord }

func (r *callRecorder) LogCall(c *Call) {
	rec := callRecord{overall: c.Overall, codes: slices.Clone(c.Codes), err: c.StoreErr != nil}
	for i, d := range c.Request.GetDescriptors() {
		var bv []bool
		for j := range d.GetEntries() {
			bv = append(bv, c.ByValue(i, j))
		}
		rec.byValue = append(rec.byValue, bv)
	}
	r.calls = append(r.calls, rec)
}

// brokenStore fails every decision, as a store that cannot be reached
// does (the on_error path).
type brokenStore struct{ ratelimit.Store }

func (brokenStore) Decide(context.Context, time.Time, []ratelimit.Hit, []ratelimit.Decision) (bool, error) {
	return false, errors.New("store down")
}

// TestCallLog: every answered call reaches the call logger with each
// descriptor's code and which entries the configuration matched by value;
// a store failure logs store_error codes and the on_error answer.
func TestCallLog(t *testing.T) {
	cfg, err := envoyconf.Load([]envoyconf.File{{Name: "e.yaml", Data: []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 1}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(memstore.Options{MaxKeys: 100})
	defer mem.Close()
	clock := time.Unix(1_800_000_030, 0)
	rec := &callRecorder{}
	s, err := New(Options{Store: mem, Local: mem, Now: func() time.Time { return clock }, CallLog: rec}, Snapshot{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	req := &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "a"), entryDesc("path", "/login"), entryDesc("nope", "x")}}
	for range 2 {
		if _, err := s.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	// A refused call is not logged.
	if _, err := s.ShouldRateLimit(context.Background(), &rlpb.RateLimitRequest{Domain: "edge"}); err == nil {
		t.Fatal("an empty call was answered")
	}
	broken, err := New(Options{Store: brokenStore{}, OnError: ErrorAllow, Now: func() time.Time { return clock }, CallLog: rec}, Snapshot{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := broken.ShouldRateLimit(context.Background(), req); err != nil || resp.GetOverallCode() != rlpb.RateLimitResponse_OK {
		t.Fatalf("on_error allow: %v %v", resp, err)
	}
	want := []callRecord{
		{rlpb.RateLimitResponse_OK, []string{"ok", "ok", "no_limit"}, [][]bool{{false}, {true}, {false}}, false},
		{rlpb.RateLimitResponse_OVER_LIMIT, []string{"ok", "over_limit", "no_limit"}, [][]bool{{false}, {true}, {false}}, false},
		{rlpb.RateLimitResponse_OK, []string{"store_error", "store_error", "store_error"}, [][]bool{{false}, {true}, {false}}, true},
	}
	if len(rec.calls) != len(want) {
		t.Fatalf("%d calls logged, want %d: %+v", len(rec.calls), len(want), rec.calls)
	}
	for i, w := range want {
		g := rec.calls[i]
		if g.overall != w.overall || !slices.Equal(g.codes, w.codes) || g.err != w.err || len(g.byValue) != len(w.byValue) {
			t.Fatalf("call %d: %+v, want %+v", i+1, g, w)
		}
		for j := range w.byValue {
			if !slices.Equal(g.byValue[j], w.byValue[j]) {
				t.Fatalf("call %d descriptor %d: by value %v, want %v", i+1, j, g.byValue[j], w.byValue[j])
			}
		}
	}
}
