// Package accesslog writes Tollgate's access log — one line per request,
// and one per call of Envoy's rate limit service (RLSCall), in the
// "combined" or "jsonl" format — and reads it back. The Parser is the
// input of `gateway replay`: whatever Writer writes, Parser reads, so an
// operator can replay yesterday's traffic against a new limit.
//
// Client identities are hashed by default (Options.RawClient logs them as
// they are); API keys are always hashed. A hash is stable, so replaying a
// log still counts every client in its own bucket.
package accesslog

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"
)

// Format is an access log line format.
type Format uint8

// Formats.
const (
	// Auto, for Parser only, tells the formats apart line by line: a line
	// starting with '{' is jsonl, any other combined.
	Auto Format = iota
	// Combined is the Apache/nginx combined format with Tollgate's fields
	// appended as key=value tokens:
	//
	//	CLIENT - - [02/Jan/2006:15:04:05.000000 -0700] "GET /path HTTP/1.1" 200 512 "REFERER" "USER-AGENT" route=R outcome=O decision=D limit=L latency=0.001234 kind=K key=H ip=I
	//
	// followed by consumer=C plan=P when the request had a consumer or a
	// plan, request_id=ID when it had an id, and units=L:N,L:N (limit
	// names and units counted) when it has Units. A rate limit service
	// call's line is laid out apart (see RLSCall and Writer.appendRLS).
	//
	// Every value is written with %XX escapes for bytes outside printable
	// ASCII and for '%', '"', '\\' and space; "-" stands for an empty value.
	Combined
	// JSONL is one JSON object per line with the fields of Entry.
	JSONL
)

// ParseFormat maps "combined", "jsonl" (or "json") and "auto" to a Format.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "combined":
		return Combined, nil
	case "jsonl", "json":
		return JSONL, nil
	case "auto", "":
		return Auto, nil
	}
	return 0, fmt.Errorf("unknown access log format %q (want combined or jsonl)", s)
}

// String returns the format's configuration name.
func (f Format) String() string {
	switch f {
	case Combined:
		return "combined"
	case JSONL:
		return "jsonl"
	case Auto:
		return "auto"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Entry is one request of the access log.
//
// Given to Writer.Log, Client, IP and APIKey are the raw values; the writer
// hashes them as configured. Read back by Parser, they hold what was logged
// (hashes, or raw client values when the log was written raw).
type Entry struct {
	// Time is when the request arrived.
	Time time.Time
	// Client is the client identity; "" when none was resolved.
	Client string
	// ClientKind is its source: "api_key", "user", "mtls", "consumer", "ip" or
	// "remote_addr".
	ClientKind string
	// APIKey is the API key, "" when none was sent.
	APIKey string
	// IP is the client IP, "" when unknown.
	IP string
	// Method, Path and Proto are the request line; Path excludes the query.
	Method, Path, Proto string
	// Status is the status code sent to the client.
	Status int
	// Bytes is the response body size, -1 when unknown.
	Bytes int64
	// Referer and UserAgent are the request's headers ("" when absent).
	Referer, UserAgent string
	// Route is the matched route's name, "" when none matched.
	Route string
	// Outcome is what the gateway did: forwarded, limited, shadow_limited,
	// store_error, no_route, upstream_error, bad_request or unauthorized.
	Outcome string
	// Decision is "allowed" or "denied", "" when no limit was decided.
	Decision string
	// Limit is the binding limit: the one that denied, or the most
	// restrictive one that allowed; "" when none.
	Limit string
	// Latency is the request's time in the gateway.
	Latency time.Duration
	// Consumer is the registered consumer's name and Plan the client's
	// plan, "" for none. Both are operator-chosen names and logged as
	// they are.
	Consumer, Plan string
	// RequestID is the request's X-Request-Id, "" when none was given
	// (server.request_id off, or a line written before it existed).
	RequestID string
	// RLS, when set, makes the entry a call of Envoy's rate limit
	// service rather than an HTTP request: Time, Latency, Status (200,
	// or 429 for OVER_LIMIT), Outcome ("ok", "over_limit" or
	// "store_error") and Decision ("allowed" or "denied": the overall
	// code) are the call's, Method is "RLS" when read back, and the
	// other request fields are empty.
	RLS *RLSCall
	// Units are the units each limit finally counted for the request,
	// logged when some were known only after the answer (a limit counting
	// by response, a token budget's settled reservation); nil otherwise.
	// Replay counts a limit's logged usage again (see the replay package).
	Units []Units
}

// Units is what one limit counted for one request.
type Units struct {
	// Limit is the limit's name.
	Limit string
	// N is the units counted, 0..2^53.
	N int64
}

// maxUnits is the largest units value a line may carry: 2^53.
const maxUnits = int64(1) << 53

// maxUnitsPerLine bounds the limits a line's units name.
const maxUnitsPerLine = 64

// Hash returns the logged form of an identity value of the given kind:
// the first 12 bytes of SHA-256(salt, kind, value), base64url (16
// characters). Values of different kinds never share a hash. A secret salt
// keeps low-entropy values such as IPv4 addresses from being recovered by
// brute force.
func Hash(salt []byte, kind, value string) string {
	var buf [16]byte
	return string(appendHash(buf[:0], salt, kind, value))
}

// Client returns a client identity for reports outside the log (the top
// clients of a limit, a candidate's record), so that an operator can find
// the same client in both: a registered consumer by its name, as the
// log's consumer field shows it (an operator's name, no secret); any
// other identity as a Writer with o logs it, hashed (an IPv6 address as
// its IPv6Prefix prefix) unless RawClient, and an API key always hashed.
func (o Options) Client(kind, value string) string {
	switch {
	case kind == "consumer":
		return value
	case o.RawClient && kind != "api_key":
		return value
	case kind == "ip":
		return Hash(o.Salt, kind, (&Writer{opts: o}).counted(value))
	}
	return Hash(o.Salt, kind, value)
}

func appendHash(dst, salt []byte, kind, value string) []byte {
	h := sha256.New()
	h.Write(salt)
	var n [1]byte
	n[0] = byte(len(kind))
	h.Write(n[:])
	h.Write([]byte(kind))
	h.Write([]byte(value))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return base64.RawURLEncoding.AppendEncode(dst, sum[:12])
}
