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
