package proxy

import "testing"

// TestGRPCMessageEncoding: grpc-message is percent-encoded as gRPC wants:
// printable ASCII but '%' as is, every other byte as %XX.
func TestGRPCMessageEncoding(t *testing.T) {
	for in, want := range map[string]string{
		`rate limit "a" exceeded; retry in 3s`: `rate limit "a" exceeded; retry in 3s`,
		"100% used":                            "100%25 used",
		"line\nbreak\r\x00":                    "line%0Abreak%0D%00",
		"café":                                 "caf%C3%A9",
		"":                                     "",
	} {
		if got := grpcMessage(in); got != want {
			t.Errorf("grpcMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
