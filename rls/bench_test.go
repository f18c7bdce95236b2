package rls

import (
	"context"
	"strconv"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkShouldRateLimit is one call of two descriptors decided on the
// memory store, without gRPC: the service's own cost.
func BenchmarkShouldRateLimit(b *testing.B) {
	s, _ := newTestServer(b, 100000)
	reqs := make([]*rlpb.RateLimitRequest, 1000)
	for i := range reqs {
		reqs[i] = &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{
			entryDesc("remote_address", "10.0."+strconv.Itoa(i)), entryDesc("user", strconv.Itoa(i%10), "path", "/p")}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

type discardCalls struct{}

func (discardCalls) LogCall(*Call) {}

// BenchmarkShouldRateLimitCallLog is BenchmarkShouldRateLimit with a call
// logger that keeps nothing: what the access log's hook costs the
// service before a line is written.
func BenchmarkShouldRateLimitCallLog(b *testing.B) {
	s, _ := newTestServer(b, 100000)
	s.opts.CallLog = discardCalls{}
	reqs := make([]*rlpb.RateLimitRequest, 1000)
	for i := range reqs {
		reqs[i] = &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{
			entryDesc("remote_address", "10.0."+strconv.Itoa(i)), entryDesc("user", strconv.Itoa(i%10), "path", "/p")}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkShouldRateLimitVariants is BenchmarkShouldRateLimit with the
// descriptors carrying their own limit, and with dynamic_metadata on.
func BenchmarkShouldRateLimitVariants(b *testing.B) {
	for _, v := range []struct {
		name     string
		own, dyn bool
	}{{"configured", false, false}, {"request limit", true, false}, {"dynamic metadata", false, true}} {
		b.Run(v.name, func(b *testing.B) {
			s, _ := newTestServer(b, 100000)
			if v.dyn {
				snap := s.cur.Load().Snapshot
				snap.DynamicMetadata = true
				s.Swap(snap)
			}
			reqs := make([]*rlpb.RateLimitRequest, 1000)
			for i := range reqs {
				ds := []*commonpb.RateLimitDescriptor{entryDesc("remote_address", "10.0."+strconv.Itoa(i)), entryDesc("user", strconv.Itoa(i%10), "path", "/p")}
				if v.own {
					for _, d := range ds {
						d.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1000000, Unit: 2}
					}
				}
				reqs[i] = &rlpb.RateLimitRequest{Domain: "edge", Descriptors: ds}
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
