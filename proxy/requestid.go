package proxy

import (
	"math/rand/v2"
	"net/http"

	"github.com/tollgate/gateway/policy"
)

// requestIDHeader is the header that names a request across the gateway,
// its upstream and their logs.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds an X-Request-Id a trusted proxy sent: longer ones
// are replaced (an id is a log field and a header on every hop).
const maxRequestIDLen = 128

// idsPerBatch is how many request ids one batch holds: the text of a
// batch is one string and its header values one slice, so an id costs
// two allocations per batch instead of two per request.
const idsPerBatch = 64

// idLen is the length of a generated id: 128 bits in hex.
const idLen = 32

// hexPairs is every byte's two hex digits, so that a byte is written with
// two lookups rather than two shifts, masks and lookups.
var hexPairs = func() string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 512)
	for i := range 256 {
		b = append(b, digits[i>>4], digits[i&15])
	}
	return string(b)
}()

// putHex writes x as 16 hex digits into dst[:16], a byte at a time.
func putHex(dst []byte, x uint64) {
	_ = dst[15]
	for j := 0; j < 16; j += 2 {
		c := int(byte(x))
		dst[j], dst[j+1] = hexPairs[2*c], hexPairs[2*c+1]
		x >>= 8
	}
}

// idBatch is a run of generated ids. Each id is a substring of one
// string and each header value a one-element, full-capacity slice of
// vals, so that nobody appending to a header value can write into its
// neighbour's. The memory of a batch lives while any of its ids does.
// Every pooled request holds a batch of its own (request.ids), so taking
// an id needs no lock and no pool of its own.
type idBatch struct {
	vals []string
	next int
}

// take returns a fresh request id as a header value. The ids are unique,
// not secret: each batch starts at 128 random bits (math/rand/v2's
// runtime generator, seeded by the system), so ids tell outsiders
// nothing of the gateway's request rate; within a batch they count up.
func (b *idBatch) take() []string {
	if b.next >= len(b.vals) {
		b.refill()
	}
	v := b.vals[b.next : b.next+1 : b.next+1]
	b.next++
	return v
}

func (b *idBatch) refill() {
	// Two random words per batch: the first is every id's first half,
	// the second plus the id's index its second half. Ids of one batch
	// differ in their second half; two batches (two requests' scratch,
	// two gateways) share one only if 64 random bits and a 64-bit range
	// meet: never, in practice.
	var buf [idsPerBatch * idLen]byte
	var first [idLen / 2]byte
	putHex(first[:], rand.Uint64())
	next := rand.Uint64()
	for i := 0; i < len(buf); i += idLen {
		copy(buf[i:], first[:])
		putHex(buf[i+idLen/2:i+idLen], next)
		next++
	}
	text := string(buf[:])
	b.vals = make([]string, idsPerBatch)
	for i := range b.vals {
		b.vals[i] = text[i*idLen : (i+1)*idLen]
	}
	b.next = 0
}

// validRequestID reports whether an id a proxy sent may be kept: 1 to
// maxRequestIDLen visible ASCII bytes (no space, no control byte: the id
// is logged and sent on).
func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// requestID returns the id of r: the one a trusted proxy sent when it is
// valid, else a new one from ids. A client's own id is replaced, since it
// could forge the correlation of log lines; so is one listed twice.
// proceed sets it as r's X-Request-Id before forwarding, and the route's
// Rewrite copies it to the upstream request.
func requestID(r *http.Request, p *policy.Policy, ids *idBatch) []string {
	if v := r.Header[requestIDHeader]; len(v) == 1 && validRequestID(v[0]) && p.Identity.PeerTrusted(r) {
		return v
	}
	return ids.take()
}
