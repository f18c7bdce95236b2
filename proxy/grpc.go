package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/ratelimit"
)

// grpcResourceExhausted is gRPC's status code RESOURCE_EXHAUSTED.
const grpcResourceExhausted = "8"

// isGRPC reports whether r is a gRPC call (gRPC-Web included): its
// client reads the outcome from grpc-status, and an HTTP 429 would reach
// it as UNAVAILABLE, which gRPC clients retry at once.
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/grpc") &&
		(len(ct) == len("application/grpc") || ct[len("application/grpc")] == '+' ||
			ct[len("application/grpc")] == ';' || ct[len("application/grpc")] == '-')
}

// writeGRPCLimited answers a limited gRPC call as gRPC does: HTTP 200
// with grpc-status 8 (RESOURCE_EXHAUSTED) in a headers-only response, the
// wait in grpc-retry-pushback-ms (-1, "do not retry", for a cost no wait
// can fit) beside the rate-limit headers already set, and the problem's
// detail as grpc-message.
func writeGRPCLimited(w http.ResponseWriter, pb headers.Problem, hits []ratelimit.Hit, ds []ratelimit.Decision) {
	h := w.Header()
	h["Content-Type"] = []string{"application/grpc"}
	h["Grpc-Status"] = []string{grpcResourceExhausted}
	h["Grpc-Message"] = []string{grpcMessage(pb.Detail)}
	pushback := int64(-1)
	if i := headers.Pick(hits, ds); i >= 0 && !ds[i].Allowed && !ds[i].Never {
		pushback = int64((ds[i].RetryAfter + time.Millisecond - 1) / time.Millisecond)
	}
	h["Grpc-Retry-Pushback-Ms"] = []string{strconv.FormatInt(pushback, 10)}
	w.WriteHeader(http.StatusOK)
}

// grpcMessage percent-encodes s as the gRPC protocol wants grpc-message:
// every byte outside printable ASCII, and '%' itself.
func grpcMessage(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
