package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/tollgate/gateway/headers"
)

// upstreamError answers a failed upstream exchange: 504 when the route's
// timeout expired, 502 otherwise, nothing when the client went away.
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var q *request
	if sw, ok := w.(*statusWriter); ok {
		q = sw.q
	}
	if q != nil {
		q.ev.Outcome = OutcomeUpstreamError
	}
	var bodyErr *error
	if q != nil && q.body != nil {
		bodyErr = q.body.err.Load()
	}
	switch {
	case q != nil && q.body != nil && q.body.aborted.Load():
		// The route's timeout ran out while the client was still
		// sending its body: the client was slow, not the upstream.
		q.ev.Outcome = OutcomeBadRequest
		closeAfter(w, r) // bodylimit.go
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusRequestTimeout,
			Title:  "Request Timeout",
			Detail: "the request body did not arrive within the route's timeout",
		})
	case bodyErr != nil && *bodyErr == errBodyTooLarge:
		// A body without a Content-Length (chunked, HTTP/2) went past the
		// route's max_body_bytes while it streamed: the exchange was cut.
		q.ev.Outcome = OutcomeBadRequest
		tooLarge(w, r, q.body.limit)
	case bodyErr != nil:
		// The client's body was malformed (bad chunk framing, too large):
		// the client's fault, not the upstream's.
		q.ev.Outcome = OutcomeBadRequest
		closeAfter(w, r) // bodylimit.go
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusBadRequest,
			Title:  "Bad Request",
			Detail: "the request body could not be read: " + (*bodyErr).Error(),
		})
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusGatewayTimeout,
			Title:  "Gateway Timeout",
			Detail: "the upstream did not answer in time",
		})
	case errors.Is(err, errNoTarget):
		// Every target fails its active health check (passive health
		// alone never ejects more than half of them), or each one left
		// was tried. /readyz says so too.
		route := ""
		if q != nil && q.rt != nil {
			route = " of route " + strconv.Quote(q.rt.Name)
		}
		w.Header()["Retry-After"] = headers.IntValue(1)
		headers.WriteProblem(w, headers.Problem{
			Status:     http.StatusServiceUnavailable,
			Title:      "Service Unavailable",
			Detail:     "no upstream target" + route + " is healthy; retry in 1s",
			RetryAfter: 1,
		})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client disconnected; there is nobody to answer. 499 is what
		// operators know from nginx; it only reaches logs and metrics.
		w.WriteHeader(499)
	default:
		h.logUpstreamError(r, err)
		headers.WriteProblem(w, headers.Problem{
			Status: http.StatusBadGateway,
			Title:  "Bad Gateway",
			Detail: "the upstream could not be reached or answered badly",
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
