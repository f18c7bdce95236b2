package proxy

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/expr"
	"github.com/tollgate/gateway/ratelimit"
)

// request is the per-request scratch space, pooled.
type request struct {
	hits []ratelimit.Hit
	ds   []ratelimit.Decision
	// decider is the store whose Decide counted hits (the store, or the
	// local fallback): their concurrency units go back to it, and to no
	// other.
	decider ratelimit.Store
	// varied is set when a hit's limit is not the one the route's
	// precompiled RateLimit-Policy for the identity describes (an
	// override's).
	varied bool
	// id is the request's identity (zero when no limit needed it).
	id keys.Identity
	ev Event
	// body wraps the client's request body, if there is one.
	body *bodyReader
	// w wraps the client's ResponseWriter; the ReverseProxy error handler
	// finds the request through it.
	w statusWriter
	// resp is the state of limits that count by response.
	resp respCount
	// rid is the request's X-Request-Id as a header value (nil when
	// server.request_id is off), set on the answer when its header is
	// written.
	rid []string
	// cors is the matched route's cors table (nil: none) and origin the
	// request's Origin when it is allowed: the answer's CORS headers are
	// set when its header is written (statusWriter.WriteHeader), whoever
	// answers.
	cors   *policy.CORS
	origin string
	// ids are the request ids this scratch space hands out; kept by
	// reset, so that a batch serves 64 requests.
	ids idBatch
	// ad holds the request's slots of adaptive limits (adaptive.go), and
	// candAd its places at the candidate's (candidate_adaptive.go).
	ad     adaptiveReq
	candAd []candHold
	// hashKey is the request's hash key on a route balanced by hash (0:
	// none, round robin), read by the route's transport.
	hashKey uint64
	// The request as serve, decide and proceed share it, so that each
	// takes q alone: the client's request (with the tracer's context), the
	// policy snapshot it is served under, the route it matched (nil before
	// the match), its path as sent (raw) and as matched (path), and the
	// instant it arrived, which its decision is made at.
	r         *http.Request
	snap      *snapshot
	rt        *policy.Route
	raw, path string
	start     time.Time
	// vars are the limits' expression variables (limit_expr.go), filled
	// once varsSet; peeked says the body was read for them.
	vars            expr.Vars
	varsSet, peeked bool
}

// bodyReader records the first error reading the client's body, so that a
// malformed body is answered 400, not blamed on the upstream. It is written
// by the transport's body-copying goroutine, which may outlive the request;
// so it is allocated per request, never pooled.
type bodyReader struct {
	io.ReadCloser
	err atomic.Pointer[error]
	// eof is set once the whole body has been read.
	eof atomic.Bool
	// clock, when an adaptive limit learns from the exchange, is the
	// handler's clock, and eofAt the instant (Unix ns) the whole body had
	// been read on it: the upstream's latency starts there, not while a
	// client trickles its upload.
	clock func() time.Time
	eofAt atomic.Int64
	// aborted is set when the route's timeout ran out before the body
	// arrived: a trickled upload cannot hold the exchange open.
	aborted atomic.Bool
	// rw is the client's ResponseWriter, whose connection abort cuts off.
	rw http.ResponseWriter
	// limit is the route's max_body_bytes (0: none) and n the bytes read
	// so far (only the one goroutine that reads the body touches it).
	limit, n int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.limit > 0 {
		p = b.bounded(p)
	}
	n, err := b.ReadCloser.Read(p)
	if b.limit > 0 {
		var over bool
		if n, over = b.count(n); over {
			err = errBodyTooLarge
			b.err.CompareAndSwap(nil, &err)
			return n, err
		}
	}
	if err == io.EOF {
		if b.clock != nil && !b.eof.Load() {
			b.eofAt.Store(b.clock().UnixNano())
		}
		b.eof.Store(true)
	} else if err != nil {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// abort stops waiting for a body still on its way: the read deadline of
// the client's connection is set to now, which ends a read blocked on it.
// The connection is closed after the answer, since its body is unread.
func (b *bodyReader) abort() {
	if b.eof.Load() {
		return
	}
	b.aborted.Store(true)
	_ = http.NewResponseController(b.rw).SetReadDeadline(time.Now())
}

func (q *request) reset() {
	clear(q.hits)
	q.hits = q.hits[:0]
	q.ds = q.ds[:0]
	q.decider = nil
	q.varied = false
	q.id = keys.Identity{}
	q.ev = Event{}
	q.body = nil
	q.w = statusWriter{}
	q.resp.reset()
	q.rid, q.cors, q.origin = nil, nil, ""
	q.hashKey = 0
	q.ad.reset()
	clear(q.candAd)
	q.candAd = q.candAd[:0]
	q.r, q.snap, q.rt = nil, nil, nil
	q.raw, q.path, q.start = "", "", time.Time{}
	if q.varsSet {
		q.vars.Reset()
		q.varsSet, q.peeked = false, false
	}
}

func grow(ds []ratelimit.Decision, n int) []ratelimit.Decision {
	if cap(ds) < n {
		return make([]ratelimit.Decision, n)
	}
	ds = ds[:n]
	clear(ds)
	return ds
}

// finishHeader sets what every answer carries, the upstream's and the
// gateway's alike, once its status is known and just before its header
// is written: the request id (replacing an upstream's) and the CORS
// headers.
func (q *request) finishHeader(hd http.Header) {
	q.ad.header()
	if q.rid != nil {
		hd[requestIDHeader] = q.rid
	}
	if q.cors != nil {
		setCORSHeaders(hd, q.cors, q.origin)
	}
}

// finishInformational cleans an upstream's informational answer (103
// Early Hints) before it is relayed: it is the upstream's answer too, so
// the headers the route's response rules name (a Server the operator
// replaces, an internal name it removes) and, on a cors route, the
// upstream's Access-Control-* go, and the request id replaces the
// upstream's. The rules' own values are for the final answer only.
func (q *request) finishInformational(hd http.Header) {
	if q.rid != nil {
		hd[requestIDHeader] = q.rid
	}
	if q.rt != nil && q.rt.ResponseHeaders != nil {
		dropGoverned(hd, q.rt.ResponseHeaders) // headerrules.go
	}
	if q.cors != nil {
		dropCORSHeaders(hd) // cors.go
	}
}
