package keys

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
)

// PartKind is the kind of one component of a counter key. The zero value is
// invalid.
type PartKind uint8

// The key parts a limit's "by" list names.
const (
	// PartClient is the resolved client identity (its kind and value).
	PartClient PartKind = iota + 1
	// PartIP is the client IP (IPv6 masked to the configured prefix).
	PartIP
	// PartAPIKey is the API key.
	PartAPIKey
	// PartUser is the user.
	PartUser
	// PartRoute is the matched route's name.
	PartRoute
	// PartMethod is the request method.
	PartMethod
	// PartHeader is the first value of a request header.
	PartHeader
	// PartMTLS is the verified client certificate's subject.
	PartMTLS
	// PartConsumer is the registered consumer (its name); a request
	// from none is keyed by its client identity instead, in the client's
	// own namespace, unless on_missing says otherwise.
	PartConsumer
	// PartExpr is the value of a limit's key expression (Values.Expr);
	// never named in a by list.
	PartExpr
)

var partNames = [...]string{
	PartClient:   "client",
	PartIP:       "ip",
	PartAPIKey:   "api_key",
	PartUser:     "user",
	PartRoute:    "route",
	PartMethod:   "method",
	PartHeader:   "header",
	PartMTLS:     "mtls",
	PartConsumer: "consumer",
	PartExpr:     "expr",
}

// String returns the configuration name of k, e.g. "api_key".
func (k PartKind) String() string {
	if k == 0 || int(k) >= len(partNames) {
		return fmt.Sprintf("PartKind(%d)", uint8(k))
	}
	return partNames[k]
}

// Part is one component of a counter key: client, ip, api_key, user, route,
// method, consumer or header:<Name>.
type Part struct {
	// Kind is what the part reads.
	Kind PartKind
	// Header is the canonical header name for PartHeader, "" otherwise.
	Header string
}

// ParsePart parses one entry of a limit's `by` list, e.g. "client" or
// "header:X-Tenant" (the header name is canonicalized).
func ParsePart(s string) (Part, error) {
	if name, ok := strings.CutPrefix(s, "header:"); ok {
		if !IsToken(name) {
			return Part{}, fmt.Errorf("key part %q: invalid header name", s)
		}
		return Part{Kind: PartHeader, Header: canonicalHeader(name)}, nil
	}
	for k, name := range partNames {
		if k != 0 && PartKind(k) != PartHeader && PartKind(k) != PartExpr && name == s {
			return Part{Kind: PartKind(k)}, nil
		}
	}
	return Part{}, fmt.Errorf("unknown key part %q (want client, ip, api_key, user, mtls, route, method, consumer or header:<Name>)", s)
}

// String returns the configuration text of p, e.g. "header:X-Tenant".
func (p Part) String() string {
	if p.Kind == PartHeader {
		return "header:" + p.Header
	}
	return p.Kind.String()
}

// Value kinds of the key encoding. Every value is written as its kind byte,
// the uvarint length of its bytes and the bytes, so that values of different
// kinds never encode alike and no tuple of values encodes like another.
const (
	valAPIKey byte = iota + 1
	valUser
	valIPv4   // 4 address bytes
	valIPv6   // prefix length byte + 16 masked address bytes
	valRemote // literal RemoteAddr text (no parsable IP)
	valRoute
	valMethod
	valHeader  // header name, then its value under valHeaderV
	valHeaderV //
	valMissing // the literal "-" for a part absent on this request
	valMTLS    // a verified client certificate's subject
	valConsumer
	valExpr     // a key expression's value
	valExprHash // the SHA-256 of a key expression's value longer than maxExprValue
)

// maxExprValue bounds a key expression's value as it enters a key's
// input: a longer one (an expression may concatenate whole headers or
// a body field) enters as its SHA-256, so that the key cache, which keeps
// inputs, holds no more per key than for any other part.
const maxExprValue = 64

// MissingValue is the literal value of a key part that a request
// lacks. It is hashed under its own kind, so it never equals a real "-".
const MissingValue = "-"

// hashLen is the number of SHA-256 bytes kept in a counter key.
const hashLen = 16

// KeyLen is the length of every counter key AppendKey builds:
// "{" + 22 + "}" + 22 characters.
const KeyLen = 2 + 2*22

// scratch holds encoding buffers between calls, so that AppendKey does not
// allocate once warm.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxPooled bounds the buffers returned to the pool, so that one request
// with huge header values does not pin memory.
const maxPooled = 64 << 10

// Values are what a key's request parts read besides the identity: the
// matched route's name (PartRoute), the method (PartMethod) and the
// headers (PartHeader). The live path fills them from the request; the
// admin API from the operator's query, so that both build the same key.
type Values struct {
	// Route is the matched route's name.
	Route string
	// Method is the request method; "" counts as GET.
	Method string
	// Header holds the header parts' values under canonical names; only
	// the first value of a name is read. Nil reads as no headers.
	Header http.Header
	// Expr is the value of a limit's key expression (PartExpr); "" is
	// the missing "-", which an expression that failed also keys as.
	Expr string
}

// AppendKey appends the counter key "{TAG}HASH" of the given parts for the
// identity id and the request values v to dst and returns the extended
// buffer. IPv6 addresses are keyed by e's configured prefix.
//
// HASH is the first 16 bytes of the SHA-256 of the parts' injective
// encoding, base64url without padding. TAG is the same hash of the client
// identity alone when parts include PartClient — so every limit of one
// client lands in one Redis Cluster slot — and HASH itself otherwise. The
// key contains only the characters A-Z a-z 0-9 - _ { } and no raw value.
// With no parts the key is the same for every request (one shared counter).
func (e *Extractor) AppendKey(dst []byte, parts []Part, id *Identity, v *Values) []byte {
	bp := scratch.Get().(*[]byte)
	buf, split := e.appendInput((*bp)[:0], parts, id, v)
	dst = buildKey(dst, buf, split)
	if cap(buf) <= maxPooled {
		*bp = buf
		scratch.Put(bp)
	}
	return dst
}

// Key returns the counter key AppendKey would append, as a string; the key
// of an input repeated from one request to the next is remembered, so
// that it costs neither the hashing nor an allocation again.
func (e *Extractor) Key(parts []Part, id *Identity, v *Values) string {
	bp := scratch.Get().(*[]byte)
	buf, split := e.appendInput((*bp)[:0], parts, id, v)
	key := e.keys.key(buf, split)
	if cap(buf) <= maxPooled {
		*bp = buf
		scratch.Put(bp)
	}
	return key
}

// appendInput appends what a key is the hash of: the parts' injective
// encoding and, when they include the client, the client identity's
// encoding from split on (split is -1 otherwise).
func (e *Extractor) appendInput(buf []byte, parts []Part, id *Identity, v *Values) ([]byte, int) {
	hasClient := false
	for _, p := range parts {
		buf = append(buf, byte(p.Kind))
		if p.Kind == PartClient || p.Kind == PartConsumer {
			hasClient = true
		}
		buf = e.appendPart(buf, p, id, v)
	}
	if !hasClient {
		return buf, -1
	}
	split := len(buf)
	return e.appendClient(buf, id), split
}

// HashAPIKey returns the hash of an API key under which exempt keys are
// looked up (compare with HashAPIKey(id.APIKey)), so that the raw exempt
// keys need not stay in memory.
func HashAPIKey(key string) [sha256.Size]byte {
	bp := scratch.Get().(*[]byte)
	buf := appendString((*bp)[:0], valAPIKey, key)
	sum := sha256.Sum256(buf)
	if cap(buf) <= maxPooled {
		*bp = buf
		scratch.Put(bp)
	}
	return sum
}

func (e *Extractor) appendPart(buf []byte, p Part, id *Identity, v *Values) []byte {
	switch p.Kind {
	case PartClient:
		return e.appendClient(buf, id)
	case PartIP:
		return e.appendIP(buf, id)
	case PartAPIKey:
		return appendString(buf, valAPIKey, id.APIKey)
	case PartUser:
		return appendString(buf, valUser, id.User)
	case PartMTLS:
		return appendString(buf, valMTLS, id.MTLS)
	case PartConsumer:
		// A consumer's identity is its client identity (SourceConsumer),
		// so a request without one is keyed by whoever it is.
		return e.appendClient(buf, id)
	case PartRoute:
		return appendString(buf, valRoute, v.Route)
	case PartMethod:
		m := v.Method
		if m == "" {
			m = http.MethodGet
		}
		return appendString(buf, valMethod, m)
	case PartHeader:
		buf = appendString(buf, valHeader, p.Header)
		var hv string
		if vs := v.Header[p.Header]; len(vs) > 0 {
			hv = vs[0]
		}
		return appendString(buf, valHeaderV, hv)
	case PartExpr:
		if len(v.Expr) > maxExprValue {
			sum := sha256.Sum256([]byte(v.Expr))
			return append(appendValue(buf, valExprHash, len(sum)), sum[:]...)
		}
		return appendString(buf, valExpr, v.Expr)
	}
	return append(appendValue(buf, valMissing, 2), 0, '-')
}

// appendClient encodes the client identity: its kind and value.
func (e *Extractor) appendClient(buf []byte, id *Identity) []byte {
	switch id.ClientKind {
	case SourceAPIKey:
		return appendString(buf, valAPIKey, id.Client)
	case SourceUser:
		return appendString(buf, valUser, id.Client)
	case SourceMTLS:
		return appendString(buf, valMTLS, id.Client)
	case SourceIP, SourceRemoteAddr:
		return e.appendIP(buf, id)
	case SourceConsumer:
		return appendString(buf, valConsumer, id.Client)
	}
	return append(appendValue(buf, valMissing, 2), 0, '-')
}

// IPPrefix returns ip as keys count it: an IPv4 address (IPv4-mapped
// ones unmapped) as a /32, an IPv6 address masked to the configured
// ipv6_prefix bits. It is invalid when ip is.
func (e *Extractor) IPPrefix(ip netip.Addr) netip.Prefix {
	a := ip.WithZone("").Unmap()
	bits := 32
	if a.Is6() {
		bits = e.v6bits
		if bits <= 0 || bits > 128 { // an Extractor not made by NewExtractor
			bits = 64
		}
	}
	p, _ := a.Prefix(bits)
	return p
}

// appendIP encodes the client IP: an IPv4 address whole, an IPv6 address
// masked to the configured prefix, or the literal RemoteAddr when no IP
// could be parsed.
func (e *Extractor) appendIP(buf []byte, id *Identity) []byte {
	p := e.IPPrefix(id.IP)
	a := p.Addr()
	switch {
	case a.Is4():
		b := a.As4()
		return append(appendValue(buf, valIPv4, 4), b[:]...)
	case a.Is6():
		b := a.As16()
		buf = append(appendValue(buf, valIPv6, 17), byte(p.Bits()))
		return append(buf, b[:]...)
	}
	return appendString(buf, valRemote, id.Peer)
}

// appendString encodes one value of kind k; an empty value is the
// missing "-", encoded under the missing kind together with k.
func appendString(buf []byte, k byte, v string) []byte {
	if v == "" {
		return append(appendValue(buf, valMissing, 2), k, '-')
	}
	return append(appendValue(buf, k, len(v)), v...)
}

// appendValue writes a value header: kind byte and uvarint length.
func appendValue(buf []byte, k byte, n int) []byte {
	return binary.AppendUvarint(append(buf, k), uint64(n))
}
