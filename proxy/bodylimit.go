package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/gateway/headers"
)

// errBodyTooLarge is the error a request body past its route's
// max_body_bytes reads as: the transport then aborts the upstream
// exchange and upstreamError answers 413.
var errBodyTooLarge = errors.New("request body larger than the route's max_body_bytes")

// tooLarge answers 413 for a body past limit bytes of r. An HTTP/1
// connection is closed after the answer: the rest of the body is not
// read (an HTTP/2 stream just ends; see closeAfter). The read
// deadline set to now makes that so: net/http would otherwise try to read
// a small unread body (up to 256 KiB) once the handler returned, waiting
// on a client that never sends it (one that asked Expect: 100-continue,
// or holds it back) for as long as the client keeps the connection.
func tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	closeAfter(w, r)
	headers.WriteProblem(w, headers.Problem{
		Status: http.StatusRequestEntityTooLarge,
		Title:  "Content Too Large",
		Detail: "the request body is larger than the route's limit of " + strconv.FormatInt(limit, 10) + " bytes",
	})
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// bounded cuts p so that reading it can take the body at most one byte
// past its limit: enough to know that it is too large, no more for the
// upstream. The room left is compared before the one byte is added:
// limit - n + 1 overflows int64 for a bound of 2^63-1, which a
// configuration may hold (no upper bound is imposed on it).
func (b *bodyReader) bounded(p []byte) []byte {
	if rem := b.limit - b.n; int64(len(p)) > rem {
		return p[:rem+1]
	}
	return p
}

// count adds n bytes read and reports whether the body went past its
// limit; the bytes past it are not passed on.
func (b *bodyReader) count(n int) (int, bool) {
	b.n += int64(n)
	if b.n <= b.limit {
		return n, false
	}
	over := b.n - b.limit
	b.n = b.limit
	return n - int(over), true
}

// closeAfter has an HTTP/1 connection closed after the answer to r,
// whose body is left unread. Not an HTTP/2 one: net/http reads
// "Connection: close" there as "send GOAWAY", and the connection may
// carry other clients' streams (a front proxy multiplexing them), while
// the unread body is one stream's, ended with it.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 2 {
		w.Header().Set("Connection", "close")
	}
}
