// Package keys resolves who a request comes from and turns that identity
// into counter keys for the rate-limit stores.
//
// An Extractor reads the identity sources — an API key, a user
// (from a header set by a trusted proxy, or from a claim of a verified JWT)
// and the client IP (X-Forwarded-For believed only from trusted proxies,
// read right to left) — and Extractor.AppendKey encodes the parts of a limit's `by`
// list injectively and hashes them, so that raw identity values never reach
// a store and no value can choose its own Redis Cluster slot.
//
// The package imports only the standard library.
package keys

import "fmt"

// Source is one identity source. The zero value is invalid.
type Source uint8

// The identity sources, in the default order of Config.Sources.
const (
	// SourceAPIKey is the API key header or query parameter.
	SourceAPIKey Source = iota + 1
	// SourceUser is the user header (from a trusted proxy) or the claim of a
	// verified JWT.
	SourceUser
	// SourceIP is the client IP address.
	SourceIP
	// SourceRemoteAddr is not configurable: it is the kind of an identity
	// taken from the literal RemoteAddr text when no IP could be parsed from
	// it (for example a Unix socket listener), so that a key is never empty.
	SourceRemoteAddr
	// SourceMTLS is the subject of the client certificate the TLS listener
	// verified (server.tls.client_ca_file): an identity no header can
	// forge.
	SourceMTLS
	// SourceConsumer is not configurable either: it is the kind of an
	// identity that a registered consumer's API key or verified token
	// named. Every key of one consumer is one client.
	SourceConsumer
)

var sourceNames = [...]string{
	SourceAPIKey:     "api_key",
	SourceUser:       "user",
	SourceIP:         "ip",
	SourceRemoteAddr: "remote_addr",
	SourceMTLS:       "mtls",
	SourceConsumer:   "consumer",
}

// String returns the configuration name of s, e.g. "api_key".
func (s Source) String() string {
	if s == 0 || int(s) >= len(sourceNames) {
		return fmt.Sprintf("Source(%d)", uint8(s))
	}
	return sourceNames[s]
}

// ParseSource maps a configuration name ("api_key", "user", "ip" or "mtls") to its
// Source.
func ParseSource(s string) (Source, error) {
	switch s {
	case "api_key":
		return SourceAPIKey, nil
	case "user":
		return SourceUser, nil
	case "ip":
		return SourceIP, nil
	case "mtls":
		return SourceMTLS, nil
	}
	return 0, fmt.Errorf("unknown identity source %q (want api_key, user, ip or mtls)", s)
}
