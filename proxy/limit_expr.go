package proxy

import (
	"errors"
	"net/http"
	"os"
	"strconv"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/expr"
)

// exprResult is what a limit's expressions made of a request.
type exprResult struct {
	// skip: the limit does not apply (when is false, or an expression
	// failed under on_error = "skip").
	skip bool
	// answered: the request was answered (on_error = "deny", or its body
	// could not be read); serve stops.
	answered bool
	// cost is the cost to count, 0 when the limit's own applies.
	cost int64
	// keyed: the counter key is built from key (policy.Exprs.KeyExprParts).
	keyed bool
	key   string
	// distinct is the result of a distinct expression ("" when it failed
	// under on_error = "shared"), counted by policy.Limit.DistinctValue.
	distinct string
}

// limitExprs evaluates l's expressions for q, l.Exprs being set, and
// applies on_error = "deny" (a 400) when one fails.
func (h *Handler) limitExprs(q *request, l *policy.Limit) exprResult {
	v := q.exprVars()
	if x := l.Exprs; x.Body && !q.peeked {
		if x.When != nil && !x.When.UsesBody() {
			// A request the limit does not apply to is not made to
			// wait for its body.
			if ok, err := whenHolds(x.When, v); err == nil && !ok {
				return exprResult{skip: true}
			}
		}
		if !h.peekExprBody(q) {
			return exprResult{answered: true}
		}
	}
	res, field, err := evalExprs(l.Exprs, v)
	if err != nil {
		q.ev.Outcome = OutcomeBadRequest
		headers.WriteProblem(&q.w, headers.Problem{
			Status: http.StatusBadRequest,
			Title:  "Bad Request",
			Detail: "limit " + strconv.Quote(l.Name) + ": " + field + " failed: " + headers.Sanitize(truncateErr(err.Error())),
		})
		return exprResult{answered: true}
	}
	return res
}

// evalExprs evaluates x on v. An expression that fails is handled by
// on_error: skip and shared give their result; deny returns the error and
// the name of the field whose expression failed.
func evalExprs(x *policy.Exprs, v *expr.Vars) (res exprResult, field string, err error) {
	field = "when"
	if x.When != nil {
		var ok bool
		if ok, err = whenHolds(x.When, v); err == nil && !ok {
			return exprResult{skip: true}, "", nil
		}
	}
	if err == nil && x.Key != nil {
		field = "key"
		res.keyed = true
		res.key, err = x.Key.String(v)
	}
	if err == nil && x.Cost != nil {
		field = "cost_expr"
		res.cost, err = x.Cost.Int(v)
		if err == nil && !policy.ExprCost(res.cost) {
			err = errors.New("gave " + strconv.FormatInt(res.cost, 10) + ", not a cost in 1..2^53")
		}
	}
	if err == nil && x.Distinct != nil {
		var derr error
		if res.distinct, derr = x.Distinct.String(v); derr != nil && x.OnError != policy.ExprErrorShared {
			field, err = "distinct", derr
		}
		// shared: the request keeps its key and counts the one value
		// every failed request of that key shares, "".
	}
	if err == nil {
		return res, "", nil
	}
	switch x.OnError {
	case policy.ExprErrorSkip:
		return exprResult{skip: true}, "", nil
	case policy.ExprErrorDeny:
		return exprResult{}, field, err
	}
	// shared: one counter for every request whose expressions failed,
	// counting the distinct values they give.
	res = exprResult{keyed: true}
	if x.Distinct != nil {
		res.distinct, _ = x.Distinct.String(v)
	}
	return res, "", nil
}

// whenHolds evaluates a limit's when. One that reads request.path and is
// false on the normal path is evaluated again on the path's loose reading
// (policy.LoosePath: escapes decoded, "%2F" as '/', ";params" dropped,
// lower case), and holds if it holds there: an upstream that reads the
// path so serves "/v1%2Forders" as "/v1/orders", so the limit on
// "/v1/orders" applies to it. (A route is chosen in both readings and a
// request rejected when they differ; a when is an arbitrary condition, so
// it applies when either reading says it does.)
//
// One that reads request.query is likewise evaluated again on the
// query's other reading (expr.Vars.LooseQuery: ';' separating pairs, the
// last value of a repeated name), so "?bulk=0&bulk=1" or "?x=1;bulk=1"
// cannot dodge a when on bulk that a PHP or Rack upstream honours.
func whenHolds(w *expr.Program, v *expr.Vars) (bool, error) {
	ok, err := w.Bool(v)
	if err != nil || ok {
		return ok, err
	}
	if w.UsesPath() && policy.NeedsLoose(v.Path) {
		strict := v.Path
		v.Path = policy.LoosePath(strict)
		ok, err = w.Bool(v)
		v.Path = strict
		if err == nil && ok {
			return true, nil
		}
	}
	if w.UsesQuery() && v.LooseQuery() {
		ok, err = w.Bool(v)
		v.StrictQuery()
		if err == nil && ok {
			return true, nil
		}
	}
	return false, nil
}

// maxErrDetail bounds an expression's error in an answer.
const maxErrDetail = 200

func truncateErr(s string) string {
	if len(s) > maxErrDetail {
		return s[:maxErrDetail] + "…"
	}
	return s
}

// exprVars returns the request's expression variables, filled on first
// use.
func (q *request) exprVars() *expr.Vars {
	v := &q.vars
	if q.varsSet {
		return v
	}
	q.varsSet = true
	r, id := q.r, &q.id
	v.Method, v.Path, v.Header, v.RawQuery = r.Method, q.path, r.Header, r.URL.RawQuery
	v.IP, v.ClientID, v.ClientKind = id.IP, id.Client, id.ClientKind.String()
	v.Consumer, v.Plan, v.Claims = id.ConsumerName(), id.Plan, id.Claims
	v.Route = q.rt.Name
	return v
}

// peekExprBody reads the request body (bounded, JSON only) for the
// expressions that name it, at most once per request. It returns false
// when the request was answered: its body could not be read.
func (h *Handler) peekExprBody(q *request) bool {
	q.peeked = true
	v := q.exprVars()
	r := q.r
	if r.Body == nil || r.Body == http.NoBody {
		v.BodyErr = errNoBody
		return true
	}
	if !jsonContent(firstValue(r.Header, "Content-Type")) {
		v.BodyErr = errNotJSON
		return true
	}
	b, complete, err := peekBody(r, q.w.ResponseWriter, maxPeekBody, q.rt.Timeout)
	if err != nil {
		peekFailed(q, err)
		return false
	}
	if !complete {
		v.BodyErr = errBodyTooLong
		return true
	}
	v.Body = b
	return true
}

// peekFailed answers a request whose body could not be read before it was
// decided: 408 when it did not arrive in time, 400 otherwise (it ended
// early or broke). The connection is closed: its body is unread.
func peekFailed(q *request, err error) {
	q.ev.Outcome = OutcomeBadRequest
	closeAfter(&q.w, q.r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		headers.WriteProblem(&q.w, headers.Problem{Status: http.StatusRequestTimeout, Title: "Request Timeout",
			Detail: "the request body did not arrive in time"})
		return
	}
	headers.WriteProblem(&q.w, headers.Problem{Status: http.StatusBadRequest, Title: "Bad Request",
		Detail: "the request body could not be read"})
}

// exprKeyParts returns the key parts and values of a limit keyed by its
// expression.
func exprKeyParts(l *policy.Limit, res *exprResult, v *keys.Values) []keys.Part {
	v.Expr = res.key
	return l.Exprs.KeyExprParts()
}

// candidateVars returns the variables a candidate configuration's
// expressions see for the live request q: the candidate's identity and
// route, and the body as the live path read it (a body it did not read is
// not offered: the request has been forwarded).
func candidateVars(q *request, r *http.Request, id *keys.Identity, rt *policy.Route, path string) *expr.Vars {
	v := &expr.Vars{Method: r.Method, Path: path, Header: r.Header, RawQuery: r.URL.RawQuery,
		IP: id.IP, ClientID: id.Client, ClientKind: id.ClientKind.String(),
		Consumer: id.ConsumerName(), Plan: id.Plan, Claims: id.Claims, Route: rt.Name}
	if q.peeked {
		v.Body, v.BodyErr = q.vars.Body, q.vars.BodyErr
	} else {
		v.BodyErr = errors.New("the request body was not read for the live configuration")
	}
	return v
}
