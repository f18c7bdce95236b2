package keys

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Distinct is what a distinct limit counts the distinct values of (its
// `distinct` setting): one key part (client, ip, api_key, user, mtls,
// route, method, consumer, header:<Name>), the client IP masked to a
// shorter IPv4 prefix ("ip/24": a network rather than an address), or
// the request's normal path ("path").
//
// An expression (a value computed from the request, a JSON body field
// among them) is the other kind of distinct value: the policy evaluates
// it and DistinctExprValue hashes its result.
type Distinct struct {
	// Part is the key part read, when Path is false.
	Part Part
	// V4Bits, when positive, masks an IPv4 client address to that many
	// bits (Part is ip); an IPv6 address is masked to the gateway's
	// ipv6_prefix as ip keys are.
	V4Bits int
	// Path counts the request's normal path.
	Path bool
}

// ParseDistinct parses a limit's `distinct` setting.
func ParseDistinct(s string) (Distinct, error) {
	if s == "path" {
		return Distinct{Path: true}, nil
	}
	if bits, ok := strings.CutPrefix(s, "ip/"); ok {
		n, err := strconv.Atoi(bits)
		if err != nil || n < 1 || n > 32 {
			return Distinct{}, fmt.Errorf("distinct %q: want ip/<1..32> (an IPv4 prefix length)", s)
		}
		return Distinct{Part: Part{Kind: PartIP}, V4Bits: n}, nil
	}
	p, err := ParsePart(s)
	if err != nil {
		return Distinct{}, fmt.Errorf("distinct %q: want a key part, ip/<bits> or path", s)
	}
	return Distinct{Part: p}, nil
}

// String returns the configuration text of d.
func (d Distinct) String() string {
	switch {
	case d.Path:
		return "path"
	case d.V4Bits > 0:
		return "ip/" + strconv.Itoa(d.V4Bits)
	}
	return d.Part.String()
}

// valPath and valIPv4Net are the kinds of the distinct-only values.
const (
	valPath         byte = 0x40 + iota // a normal path
	valIPv4Net                         // prefix length byte + 4 masked address bytes
	valDistinctExpr                    // a distinct expression's string result
)

// DistinctValue returns the 64-bit hash of d's value for the identity id,
// the request values v and the normal path: the first 8 bytes of the
// SHA-256 of its injective encoding (as counter keys hash their parts),
// so no raw value reaches a store, and every gateway sharing a store
// hashes a value alike. missing reports a value the request lacks (an
// identity part or header absent), which on_missing decides; its hash is
// then that of the missing value. The value is read whole whatever its
// length: the header and path bounds of the server bound it.
func (e *Extractor) DistinctValue(d Distinct, id *Identity, v *Values, path string) (h uint64, missing bool) {
	bp := scratch.Get().(*[]byte)
	buf := (*bp)[:0]
	switch {
	case d.Path:
		buf = appendString(buf, valPath, path)
	case d.V4Bits > 0 && id.IP.Unmap().Is4():
		a := id.IP.Unmap()
		p, _ := a.Prefix(d.V4Bits)
		b := p.Addr().As4()
		buf = append(append(appendValue(buf, valIPv4Net, 5), byte(d.V4Bits)), b[:]...)
	default:
		buf = append(buf, byte(d.Part.Kind))
		buf = e.appendPart(buf, d.Part, id, v)
		missing = Missing([]Part{d.Part}, id, v.Header)
	}
	sum := sha256.Sum256(buf)
	if cap(buf) <= maxPooled {
		*bp = buf
		scratch.Put(bp)
	}
	return binary.LittleEndian.Uint64(sum[:8]), missing
}

// DistinctExprValue returns the 64-bit hash of a distinct expression's
// result s, hashed as DistinctValue hashes a key part's value but under a
// kind of its own, so that an expression giving "1.2.3.4" never counts as
// the same value as the ip part 1.2.3.4. "" (an empty result, or an
// expression that failed under on_error = "shared") is one value like any
// other. s is hashed whole: the expression's cost limit and the bounded
// body read bound it.
func DistinctExprValue(s string) uint64 {
	bp := scratch.Get().(*[]byte)
	buf := append(appendValue((*bp)[:0], valDistinctExpr, len(s)), s...)
	sum := sha256.Sum256(buf)
	if cap(buf) <= maxPooled {
		*bp = buf
		scratch.Put(bp)
	}
	return binary.LittleEndian.Uint64(sum[:8])
}
