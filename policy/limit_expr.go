package policy

import (
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/policy/expr"
	"github.com/tollgate/gateway/ratelimit"
)

// Exprs are a limit's CEL expressions, compiled and type-checked at load.
type Exprs struct {
	// When, Key and Cost are the when, key and cost_expr expressions; nil
	// when not set.
	When, Key, Cost *expr.Program
	// Distinct is a distinct limit's distinct when it is an expression
	// (limit_distinct.go); nil when not set or a key part.
	Distinct *expr.Program
	// OnError is what a request whose expression fails gets.
	OnError ExprOnError
	// Body is set when one of them reads the request body.
	Body bool
}

// ExprOnError is a limit's on_error setting.
type ExprOnError uint8

// The on_error values.
const (
	// ExprErrorShared counts a request whose expression failed under one
	// key shared by every such request of the limit, at the limit's cost.
	ExprErrorShared ExprOnError = iota
	// ExprErrorSkip lets the limit not apply to it.
	ExprErrorSkip
	// ExprErrorDeny answers it 400, counted nowhere.
	ExprErrorDeny
)

// exprParts are the key parts of a limit keyed by an expression: its
// value alone (keys.Values.Expr).
var exprParts = []keys.Part{{Kind: keys.PartExpr}}

// KeyExprParts returns the key parts of a limit whose key is an
// expression: the counter key is built from keys.Values.Expr alone. A
// request whose expression failed under on_error = "shared" is keyed
// with an empty Expr, the missing value.
func (x *Exprs) KeyExprParts() []keys.Part { return exprParts }

// compileExprs compiles when, key, cost_expr, an expression distinct and
// on_error of c into l.
func compileExprs(l *Limit, c *config.LimitConfig, path string, e *problems) {
	var x Exprs
	compile := func(text, field string, k expr.Kind) *expr.Program {
		if text == "" {
			return nil
		}
		p, err := expr.Compile(text, k)
		if err != nil {
			e.add(path+"."+field, "%v", err)
			return nil
		}
		x.Body = x.Body || p.UsesBody()
		return p
	}
	x.When = compile(c.When, "when", expr.Bool)
	x.Key = compile(c.Key, "key", expr.String)
	x.Cost = compile(c.CostExpr, "cost_expr", expr.Int)
	if x.Distinct = distinctExpr(c, path, e); x.Distinct != nil {
		x.Body = x.Body || x.Distinct.UsesBody()
	}
	switch c.OnError {
	case "shared", "":
	case "skip":
		x.OnError = ExprErrorSkip
	case "deny":
		x.OnError = ExprErrorDeny
	default:
		e.add(path+".on_error", "unknown value %q (want skip, deny or shared)", c.OnError)
	}
	if c.Key != "" && len(c.By) > 0 && !sameParts(c.By, config.DefaultLimit().By) {
		e.add(path+".key", "set with by: the key expression replaces by, so set one of them")
	}
	if c.CostExpr != "" && c.CostHeader != "" {
		e.add(path+".cost_expr", "set with cost_header: set one of them")
	}
	if c.Key != "" && c.OnMissing != "" && c.OnMissing != "shared" {
		e.add(path+".on_missing", "applies to by, not to a key expression (its failures follow on_error)")
	}
	if x.When == nil && x.Key == nil && x.Cost == nil && x.Distinct == nil {
		return
	}
	if x.Key != nil {
		l.By, l.ByIP, l.OnMissing = nil, nil, OnMissingShared
	}
	l.Exprs = &x
}

// sameParts reports whether a and b list the same parts in order.
func sameParts(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ExprCost checks a cost an expression gave: 1..2^53.
func ExprCost(n int64) bool { return n >= 1 && n <= ratelimit.MaxLimit }
