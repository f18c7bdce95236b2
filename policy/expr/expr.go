// Package expr compiles and evaluates the CEL expressions of limits
// (when, key, cost_expr): type-checked once at load against the request's
// variables, then evaluated per request under a cost limit.
//
// A Program is the compiled form that any limit setting taking an
// expression reuses: compile it with the Kind the setting needs (Bool,
// String, Int) and evaluate it with the request's Vars.
package expr

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// MaxCost is the most an evaluation may cost, in CEL's cost units (about
// one per operation, one per ten bytes a string operation scans). An
// expression whose worst case the checker proves under it runs untracked;
// any other is tracked and stopped when it reaches it.
const MaxCost = 100_000

// MaxLen bounds an expression's text.
const MaxLen = 4096

// maxStringSize and maxEntries are the sizes the cost estimate assumes of
// the request's strings and maps: no header or path reaches them (the
// listener bounds a request's head to far less).
const (
	maxStringSize = 1 << 20
	maxEntries    = 1 << 12
)

// Kind is the type a setting needs its expression to produce.
type Kind uint8

// The kinds.
const (
	// Bool is a condition (when).
	Bool Kind = iota + 1
	// String is a key: a string, or an int, uint, bool or double, which is
	// formatted.
	String
	// Int is a cost: an int, a uint or a double with an integral value.
	Int
)

// Program is one compiled, type-checked expression. It is immutable and
// safe for concurrent use.
type Program struct {
	// Text is the expression as written.
	Text    string
	prg     cel.Program
	kind    Kind
	body    bool
	path    bool
	query   bool
	tracked bool
	// constant is set when the expression reads no variable.
	constant bool
	// nb and ns are the Go form of a Bool or String expression in the
	// subset native.go compiles; nil otherwise.
	nb nativeBool
	ns nativeStr
}

// env is the environment every expression is checked in: the variables
// Vars serves, the standard library, optional values (`m.?k`) and the
// strings extension (split, lowerAscii, ...). It is immutable once built.
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable(varMethod, cel.StringType),
		cel.Variable(varPath, cel.StringType),
		cel.Variable(varHeaders, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varQuery, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varClientIP, cel.StringType),
		cel.Variable(varClientID, cel.StringType),
		cel.Variable(varClientKind, cel.StringType),
		cel.Variable(varConsumer, cel.StringType),
		cel.Variable(varPlan, cel.StringType),
		cel.Variable(varClaims, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(varRoute, cel.StringType),
		cel.Variable(varBody, cel.DynType),
		cel.OptionalTypes(),
		ext.Strings(ext.StringsVersion(3)),
		cel.ParserExpressionSizeLimit(MaxLen),
	)
	if err != nil {
		panic("expr: the environment does not build: " + err.Error())
	}
	return e
}()

// Compile parses and type-checks text as an expression of kind k. The
// error is the CEL checker's message, which names the position.
func Compile(text string, k Kind) (*Program, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("is empty")
	}
	if len(text) > MaxLen {
		return nil, fmt.Errorf("is %d bytes long, more than %d", len(text), MaxLen)
	}
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		msg := strings.ReplaceAll(iss.Err().Error(), "\n", " ")
		if strings.Contains(msg, "undeclared reference") {
			msg += " (the variables are " + strings.Join(Variables(), ", ") + ")"
		}
		return nil, errors.New(msg)
	}
	if err := checkType(ast.OutputType(), k); err != nil {
		return nil, err
	}
	if err := checkCalls(ast); err != nil {
		return nil, err
	}
	p := &Program{Text: text, kind: k}
	refs := ast.NativeRep().ReferenceMap()
	p.constant = true
	for _, r := range refs {
		if r.Name != "" {
			p.constant = false // a variable (a call's reference has no name)
		}
		switch r.Name {
		case varBody:
			p.body = true
		case varPath:
			p.path = true
		case varQuery:
			p.query = true
		}
	}
	est, err := env.EstimateCost(ast, sizes{})
	p.tracked = err != nil || est.Max > MaxCost
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if p.tracked {
		opts = append(opts, cel.CostLimit(MaxCost))
	}
	if p.prg, err = env.Program(ast, opts...); err != nil {
		return nil, err
	}
	p.nb, p.ns = compileNative(ast, k)
	return p, nil
}

// checkType refuses an expression whose static type cannot be what k
// needs (dyn is judged at run time).
func checkType(t *cel.Type, k Kind) error {
	if t.IsExactType(types.DynType) {
		return nil
	}
	var ok bool
	switch k {
	case Bool:
		ok = t.IsExactType(types.BoolType)
	case String:
		ok = t.IsExactType(types.StringType) || t.IsExactType(types.IntType) || t.IsExactType(types.UintType) ||
			t.IsExactType(types.BoolType) || t.IsExactType(types.DoubleType)
	case Int:
		ok = t.IsExactType(types.IntType) || t.IsExactType(types.UintType) || t.IsExactType(types.DoubleType)
	}
	if !ok {
		return fmt.Errorf("has type %s, want %s", t, k)
	}
	return nil
}

// String names k as the README does.
func (k Kind) String() string {
	switch k {
	case Bool:
		return "bool"
	case String:
		return "string"
	case Int:
		return "int"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// UsesBody reports whether the expression reads the request body, which
// Constant reports whether the expression reads no variable: its value
// is the same for every request.
func (p *Program) Constant() bool { return p.constant }

// is then read (bounded) before it is evaluated.
func (p *Program) UsesBody() bool { return p.body }

// UsesPath reports whether the expression reads request.path.
func (p *Program) UsesPath() bool { return p.path }

// UsesQuery reports whether the expression reads request.query.
func (p *Program) UsesQuery() bool { return p.query }

// Tracked reports whether the expression's cost is tracked while it runs
// (its worst case is not proved below MaxCost).
func (p *Program) Tracked() bool { return p.tracked }

// eval runs p on v.
func (p *Program) eval(v *Vars) (ref.Val, error) {
	out, _, err := p.prg.Eval(v)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Bool evaluates a Bool expression.
func (p *Program) Bool(v *Vars) (bool, error) {
	if p.nb != nil {
		if b, ok := p.nb(v); ok {
			return b, nil
		}
		// CEL words the failure.
	}
	out, err := p.eval(v)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("gave %s, want bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// String evaluates a String expression; numbers and booleans are
// formatted.
func (p *Program) String(v *Vars) (string, error) {
	if p.ns != nil {
		if s, ok := p.ns(v); ok {
			return s, nil
		}
	}
	out, err := p.eval(v)
	if err != nil {
		return "", err
	}
	switch x := out.(type) {
	case types.String:
		return string(x), nil
	case types.Int:
		return strconv.FormatInt(int64(x), 10), nil
	case types.Uint:
		return strconv.FormatUint(uint64(x), 10), nil
	case types.Bool:
		return strconv.FormatBool(bool(x)), nil
	case types.Double:
		return strconv.FormatFloat(float64(x), 'g', -1, 64), nil
	}
	return "", fmt.Errorf("gave %s, want string", out.Type().TypeName())
}

// Int evaluates an Int expression; a double must be integral.
func (p *Program) Int(v *Vars) (int64, error) {
	out, err := p.eval(v)
	if err != nil {
		return 0, err
	}
	switch x := out.(type) {
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return 0, fmt.Errorf("gave %d, out of range", uint64(x))
		}
		return int64(x), nil
	case types.Double:
		f := float64(x)
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, fmt.Errorf("gave %g, not an integer", f)
		}
		return int64(f), nil
	}
	return 0, fmt.Errorf("gave %s, want int", out.Type().TypeName())
}

// sizes is the cost estimator's view of the variables: strings and maps
// of the request are bounded (maxStringSize, maxEntries); the body is
// left unknown, so an expression reading it is always tracked.
type sizes struct{}

func (sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if path := n.Path(); len(path) == 0 || path[0] == varBody {
		return nil
	}
	t := n.Type()
	switch {
	case t.IsExactType(types.StringType):
		return &checker.SizeEstimate{Min: 0, Max: maxStringSize}
	case t.Kind() == types.MapKind:
		return &checker.SizeEstimate{Min: 0, Max: maxEntries}
	}
	return nil
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// amplifiers are the overloads whose result can be far larger than their
// arguments (replace inserts a client's string at every match; join and
// format repeat list elements, which a comprehension can make many
// references to one large string). The cost limit is checked after a call
// returns, so one such call could allocate gigabytes before it stops:
// they are refused at load. Every other function's result is at most
// linear in its arguments, so the cost limit bounds an evaluation's memory.
var amplifiers = map[string]string{
	"string_replace_string_string":     "replace",
	"string_replace_string_string_int": "replace",
	"list_join":                        "join",
	"list_join_string":                 "join",
	"string_format":                    "format",
}

// checkCalls refuses amplifiers and a matches whose pattern is not a
// literal: a pattern from the request would be compiled on every
// evaluation, as large as the client makes it.
func checkCalls(a *cel.Ast) error {
	native := a.NativeRep()
	for _, r := range native.ReferenceMap() {
		for _, o := range r.OverloadIDs {
			if name, bad := amplifiers[o]; bad {
				return fmt.Errorf("%s is not allowed: its result can be far larger than its arguments", name)
			}
		}
	}
	calls := celast.MatchDescendants(celast.NavigateAST(native), celast.FunctionMatcher("matches"))
	for _, c := range calls {
		call := c.AsCall()
		args := call.Args()
		pat := args[len(args)-1]
		if pat.Kind() != celast.LiteralKind {
			return errors.New("matches needs a literal pattern (a pattern from the request would be compiled on every request)")
		}
	}
	return nil
}

// Variables returns the names of the variables expressions can read, in
// the README's order.
func Variables() []string {
	return []string{varMethod, varPath, varHeaders, varQuery, varClientIP, varClientID, varClientKind,
		varConsumer, varPlan, varClaims, varRoute, varBody}
}
