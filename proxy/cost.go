package proxy

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// maxCostHeaderLen bounds the cost header value we parse.
const maxCostHeaderLen = 20

// requestCost returns the request's cost for l: the static cost, or the
// value of l's cost header when it is present.
func requestCost(l *policy.Limit, r *http.Request) (int64, error) {
	if l.CostHeader == "" {
		return l.Cost, nil
	}
	v := r.Header.Get(l.CostHeader)
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
