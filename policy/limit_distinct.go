package policy

import (
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/policy/expr"
	"github.com/tollgate/gateway/ratelimit"
)

// compileDistinct reads c.Distinct: required with algorithm "distinct"
// and refused with the others. A key-part spelling (a key part, ip/<bits>,
// path) is parsed into l.Distinct; any other value is an expression,
// which compileExprs compiles (distinctExpr).
func compileDistinct(l *Limit, c *config.LimitConfig, path string, e *problems) {
	isDistinct := c.Algorithm == ratelimit.Distinct.String()
	switch {
	case c.Distinct == "" && isDistinct:
		e.add(path+".distinct", "is required with algorithm \"distinct\" (what to count the distinct values of: a key part, ip/<bits>, path or an expression)")
		return
	case c.Distinct == "":
		return
	case !isDistinct:
		e.add(path+".distinct", "applies only to algorithm \"distinct\"")
		return
	}
	d, err := keys.ParseDistinct(c.Distinct)
	if err != nil {
		if !distinctIsExpr(c.Distinct) {
			e.add(path+".distinct", "%v", err)
		}
		return
	}
	l.Distinct = &d
}

// distinctIsExpr reports whether a distinct value that is not a key part,
// ip/<bits> or path is read as an expression. Every key-part spelling is a
// name CEL does not declare or a map, never a string, so no text is both;
// a value written as a key part ("header:", "ip/") stays one, so a typo in
// it is reported as the key part's error rather than CEL's.
func distinctIsExpr(s string) bool {
	return !strings.HasPrefix(s, "header:") && !strings.HasPrefix(s, "ip/")
}

// distinctExpr compiles c.Distinct when it is an expression (a value of a
// distinct limit that is no key-part spelling), nil otherwise. The error
// names both readings, since a misspelt key part lands here too.
func distinctExpr(c *config.LimitConfig, path string, e *problems) *expr.Program {
	if c.Distinct == "" || c.Algorithm != ratelimit.Distinct.String() || !distinctIsExpr(c.Distinct) {
		return nil
	}
	if _, err := keys.ParseDistinct(c.Distinct); err == nil {
		return nil
	}
	p, err := expr.Compile(c.Distinct, expr.String)
	if err != nil {
		e.add(path+".distinct", "distinct %q: not a key part (client, ip, api_key, user, mtls, route, method, consumer, header:<Name>), ip/<bits> or path, and as an expression: %v", c.Distinct, err)
		return nil
	}
	if p.Constant() {
		// Every request would count as one value: the limit could
		// never deny, which no one writing it means.
		e.add(path+".distinct", "distinct %q reads nothing of the request: every request would count as the same value", c.Distinct)
		return nil
	}
	return p
}

// With an expression as the value, the proxy evaluates it with the
// limit's other expressions (one Vars per request; the body read only
// when it names body) and hands its string result to DistinctValue, which
// hashes it under a kind of its own (keys.DistinctExprValue), so it never
// equals a key part's value; everything after the hash is unchanged.

// DistinctValue returns the hash of the value a distinct limit counts for
// a request (keys.Extractor.DistinctValue), 0 for other limits. ok is
// false when the request lacks the value and on_missing is "reject": such
// a request is answered 401 and counted nowhere. Otherwise a missing
// value counts as one value, the missing one.
//
// For a limit whose distinct is an expression, xv is its result ("" when
// it failed under on_error = "shared": one value shared by every such
// request of a key), hashed by keys.DistinctExprValue.
func (l *Limit) DistinctValue(e *keys.Extractor, id *keys.Identity, v *keys.Values, path, xv string) (h uint64, ok bool) {
	if l.Exprs != nil && l.Exprs.Distinct != nil {
		return keys.DistinctExprValue(xv), true
	}
	if l.Distinct == nil {
		return 0, true
	}
	h, missing := e.DistinctValue(*l.Distinct, id, v, path)
	if missing && l.OnMissing == OnMissingReject {
		return 0, false
	}
	return h, true
}
