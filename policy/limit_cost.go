package policy

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tollgate/gateway/ratelimit"
)

// maxCostHeaderLen bounds the cost header value parsed: longer text is no
// integer in range anyway, and is not worth scanning.
const maxCostHeaderLen = 20

// RequestCost returns what a request with headers h costs under l: the
// static cost, or the value of l's cost header when the request sends one.
// A value that is not an integer in 1..2^53 is an error for the client.
func (l *Limit) RequestCost(h http.Header) (int64, error) {
	if l.CostHeader == "" {
		return l.Cost, nil
	}
	v := h.Get(l.CostHeader)
	if v == "" {
		return l.Cost, nil
	}
	if len(v) > maxCostHeaderLen {
		return 0, errors.New("header " + l.CostHeader + " is not a positive integer")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > ratelimit.MaxLimit {
		return 0, errors.New("header " + l.CostHeader + " must be an integer in 1.." + strconv.FormatInt(ratelimit.MaxLimit, 10) + ", got " + strconv.Quote(v))
	}
	return n, nil
}
