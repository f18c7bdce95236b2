// Package costscan reads one number at a dotted path out of a JSON
// document or a stream of server-sent events while the bytes pass
// through, without holding the document: the gateway's token budgets read
// the usage an upstream reports ("usage.total_tokens") from the answer it
// is forwarding, and the estimate ("max_tokens") from a request's body.
//
// The scanner keeps a fixed amount of state per document (the nesting of
// the containers it is in, one bit each, bounded by MaxDepth) and skips
// string contents with bytes.IndexByte, so it costs little beside
// copying the bytes. It checks the document's syntax as far as its
// structure goes (brackets, commas, colons, keys, literals' first byte),
// not every literal's spelling.
//
// The package imports only the standard library.
package costscan

import (
	"errors"
	"fmt"
	"strings"
)

// MaxPathKeys bounds the keys of a path; MaxKeyBytes one key's length.
const (
	MaxPathKeys = 8
	MaxKeyBytes = 64
)

// MaxDepth is the deepest nesting a document may have; a deeper one is
// not read (it has no value). It bounds the scanner's state.
const MaxDepth = 512

// MaxValue is the largest value read: 2^53, the largest integer every
// store holds exactly.
const MaxValue = int64(1) << 53

// Path is a compiled dotted path: the object keys from the root to the
// value, compared byte for byte with the keys as the document spells
// them (a key written with escapes, such as "total\u005ftokens", is
// another key). Array elements are not addressed: a path runs through
// objects only.
type Path struct {
	keys [][]byte
	// last is the last key quoted, which an event must contain to carry
	// the path (a cheap filter before an event is parsed).
	last []byte
	text string
}

// ParsePath compiles "usage.total_tokens": 1 to MaxPathKeys keys of 1 to
// MaxKeyBytes bytes each, separated by dots, each printable ASCII without
// '"', '\\' or '.'.
func ParsePath(s string) (Path, error) {
	if s == "" {
		return Path{}, errors.New("empty path")
	}
	parts := strings.Split(s, ".")
	if len(parts) > MaxPathKeys {
		return Path{}, fmt.Errorf("path %q has more than %d keys", s, MaxPathKeys)
	}
	p := Path{text: s}
	for _, k := range parts {
		if k == "" || len(k) > MaxKeyBytes {
			return Path{}, fmt.Errorf("path %q: each key must be 1..%d bytes", s, MaxKeyBytes)
		}
		for i := 0; i < len(k); i++ {
			if c := k[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
				return Path{}, fmt.Errorf("path %q: keys are printable ASCII without quotes or backslashes", s)
			}
		}
		p.keys = append(p.keys, []byte(k))
	}
	p.last = []byte(`"` + parts[len(parts)-1] + `"`)
	return p, nil
}

// String returns the path as written.
func (p Path) String() string { return p.text }

// IsZero reports whether p is the zero Path (no path configured).
func (p Path) IsZero() bool { return len(p.keys) == 0 }

// Result is what a scan found at the path.
type Result uint8

const (
	// None: the path was not found (or the document was not read to its
	// end: cut short, past its bound, not JSON).
	None Result = iota
	// Valid: the last value at the path is an integer in 0..MaxValue.
	Valid
	// Invalid: the last value at the path is anything else (negative,
	// fractional, exponent, too large, a string, an object, …).
	Invalid
)

var resultNames = [...]string{None: "none", Valid: "valid", Invalid: "invalid"}

// String returns "none", "valid" or "invalid".
func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", r)
}
