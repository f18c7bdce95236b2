package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/tollgate/gateway/headers"
)

// Forwarding loops.
//
// A route whose upstream leads back to the gateway (its own listener
// written as the upstream, a DNS name that resolves to it, a chain of
// gateways that closes on itself) would forward each request to itself
// again and again: the client address headers are rebuilt at each hop
// from an untrusted peer, so nothing grows and nothing stops the chain
// but the route's timeout. One request made thousands of hops, each
// holding a connection and goroutines (about 30,000 goroutines and
// 15,000 descriptors within two seconds), enough to exhaust the
// process's descriptors. Every forwarded request therefore carries a Via
// entry naming this process by a random pseudonym (RFC 9110 §7.6.3: a
// proxy sends Via), and a request that arrives with this process's own
// pseudonym in its Via has been here before: it is answered 508 Loop
// Detected and goes no further. Other gateways' entries (a chain of
// distinct gateways) pass.

// newVia returns this process's Via entry ("1.1 tollgate-" and 16 random
// hex digits) and the pseudonym within it.
func newVia() (entry []string, pseudonym string) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	pseudonym = "tollgate-" + hex.EncodeToString(b[:])
	v := "1.1 " + pseudonym
	// Capacity = length: an append by anyone copies, never writing into
	// the slice every request shares.
	return []string{v}[:1:1], pseudonym
}

// addVia appends h's Via entry to an outgoing request's header. Without
// a Via of its own (nearly every request) it allocates nothing.
func (h *Handler) addVia(out http.Header) {
	if v := out["Via"]; v != nil {
		out["Via"] = append(v[:len(v):len(v)], h.via[0])
		return
	}
	out["Via"] = h.via
}

// looped reports whether a request's Via values name this process.
func (h *Handler) looped(via []string) bool {
	for _, v := range via {
		if strings.Contains(v, h.viaPseudonym) {
			return true
		}
	}
	return false
}

// answerLoop answers a request that has already passed through this
// process.
func answerLoop(w http.ResponseWriter) {
	headers.WriteProblem(w, headers.Problem{
		Status: http.StatusLoopDetected,
		Title:  "Loop Detected",
		Detail: "the request has already passed through this gateway: a route's upstream leads back to it",
	})
}
