package headers

import "sync/atomic"

// Writer writes a handler's rate-limit headers (Set) and 429 answers
// (WriteTooManyRequests), keeping the last denial it wrote: a denied
// client that keeps asking is answered the same values again without
// formatting them. Each handler owns one: the package keeps no state of
// its own. The zero value is ready; a Writer is safe for concurrent use.
type Writer struct {
	// lastDenied holds the values of the last denial Set wrote.
	lastDenied atomic.Pointer[setValues]
	// lastTooMany holds the body of the last one-limit denial written: a
	// hot denied client is answered it again without building it. A miss
	// costs one copy of the body (clients denied by different limits in
	// turn); the limit it names stays reachable until the next miss
	// replaces it.
	lastTooMany atomic.Pointer[tooManyBody]
	// lastInt is the last value IntValue built beyond the table.
	lastInt atomic.Pointer[intValue]
}
