package expr

import (
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// The common conditions and keys (comparisons, prefixes and header
// lookups of the request's strings, string claims, short concatenations,
// joined by &&, || and !) are compiled to Go closures as well, which give
// CEL's answer without its interpreter: no activation, no value boxed.
// Where the Go form is not sure (a header missing, a claim that is not a
// plain string, a long concatenation) it defers (ok false) and CEL
// evaluates the expression, so CEL alone words every failure. Any other
// expression runs on CEL alone. The subset cannot loop and builds at most
// maxNativeConcat bytes, far below the cost bound; TestNativeMatchesCEL
// holds it to CEL's results.

// nativeStr is a string-valued subexpression; ok false defers the
// whole expression to CEL.
type nativeStr func(v *Vars) (s string, ok bool)

// nativeBool is a bool-valued subexpression; ok as for nativeStr. The
// logic operators treat a deferral as CEL treats an error (false && x is
// false whatever x is), which is right for a value too.
type nativeBool func(v *Vars) (b, ok bool)

// stringVars read the request's string variables.
var stringVars = map[string]nativeStr{
	varMethod:     func(v *Vars) (string, bool) { return v.Method, true },
	varPath:       func(v *Vars) (string, bool) { return v.Path, true },
	varClientID:   func(v *Vars) (string, bool) { return v.ClientID, true },
	varClientKind: func(v *Vars) (string, bool) { return v.ClientKind, true },
	varConsumer:   func(v *Vars) (string, bool) { return v.Consumer, true },
	varPlan:       func(v *Vars) (string, bool) { return v.Plan, true },
	varRoute:      func(v *Vars) (string, bool) { return v.Route, true },
	varClientIP: func(v *Vars) (string, bool) {
		if v.ip == "" && v.IP.IsValid() {
			v.ip = v.IP.String()
		}
		return v.ip, true
	},
}

// compileNative returns the Go form of a's expression for kind k, or nil
// outside the subset.
func compileNative(a *cel.Ast, k Kind) (nb nativeBool, ns nativeStr) {
	native := a.NativeRep()
	switch k {
	case Bool:
		return nativeBoolOf(native.Expr()), nil
	case String:
		return nil, nativeStrOf(native.Expr())
	}
	return nil, nil
}

// maxNativeConcat bounds what the Go form of a concatenation builds,
// and maxNativeTerms the terms it joins: within them CEL's cost is far
// below MaxCost, so both give the same answer; past them the Go form
// defers to CEL.
const (
	maxNativeConcat = 4096
	maxNativeTerms  = 8
)

func nativeStrOf(e celast.Expr) nativeStr {
	switch e.Kind() {
	case celast.SelectKind:
		// jwt.claims.NAME: a claim that is a plain JSON string is read
		// without decoding; any other defers to CEL.
		sel := e.AsSelect()
		if sel.IsTestOnly() || sel.Operand().Kind() != celast.IdentKind || sel.Operand().AsIdent() != varClaims {
			return nil
		}
		name := sel.FieldName()
		return func(v *Vars) (string, bool) {
			raw := v.Claims[name]
			if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
				return "", false
			}
			in := raw[1 : len(raw)-1]
			for _, c := range in {
				if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
					return "", false
				}
			}
			return string(in), true
		}
	case celast.LiteralKind:
		s, ok := e.AsLiteral().(types.String)
		if !ok {
			return nil
		}
		return func(*Vars) (string, bool) { return string(s), true }
	case celast.IdentKind:
		return stringVars[e.AsIdent()]
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() == "_+_" && !c.IsMemberFunction() && len(c.Args()) == 2 {
			return nativeConcat(e)
		}
		if c.FunctionName() != "_[_]" || c.IsMemberFunction() || len(c.Args()) != 2 {
			return nil
		}
		m, key := c.Args()[0], c.Args()[1]
		if m.Kind() != celast.IdentKind || m.AsIdent() != varHeaders || key.Kind() != celast.LiteralKind {
			return nil
		}
		name, ok := key.AsLiteral().(types.String)
		if !ok {
			return nil
		}
		var buf [64]byte
		canon, ok := canonicalInto(buf[:0], string(name))
		if !ok {
			return nil
		}
		h := string(canon)
		return func(v *Vars) (string, bool) {
			if vs := v.Header[h]; len(vs) > 0 {
				return vs[0], true
			}
			return "", false
		}
	}
	return nil
}

func nativeBoolOf(e celast.Expr) nativeBool {
	switch e.Kind() {
	case celast.LiteralKind:
		b, ok := e.AsLiteral().(types.Bool)
		if !ok {
			return nil
		}
		return func(*Vars) (bool, bool) { return bool(b), true }
	case celast.CallKind:
	default:
		return nil
	}
	c := e.AsCall()
	args := c.Args()
	switch fn := c.FunctionName(); {
	case (fn == "_&&_" || fn == "_||_") && !c.IsMemberFunction() && len(args) == 2:
		l, r := nativeBoolOf(args[0]), nativeBoolOf(args[1])
		if l == nil || r == nil {
			return nil
		}
		// CEL's logic is commutative over errors: false && error is
		// false, whichever side fails; true || error is true.
		short := fn == "_||_"
		return func(v *Vars) (bool, bool) {
			a, aok := l(v)
			if aok && a == short {
				return short, true
			}
			b, bok := r(v)
			if bok && b == short {
				return short, true
			}
			if !aok || !bok {
				return false, false
			}
			return !short, true
		}
	case fn == "!_" && len(args) == 1:
		x := nativeBoolOf(args[0])
		if x == nil {
			return nil
		}
		return func(v *Vars) (bool, bool) {
			b, ok := x(v)
			return !b, ok
		}
	case (fn == "_==_" || fn == "_!=_") && len(args) == 2:
		l, r := nativeStrOf(args[0]), nativeStrOf(args[1])
		if l == nil || r == nil {
			return nil
		}
		eq := fn == "_==_"
		return func(v *Vars) (bool, bool) {
			a, aok := l(v)
			if !aok {
				return false, false
			}
			b, bok := r(v)
			if !bok {
				return false, false
			}
			return (a == b) == eq, true
		}
	case (fn == "startsWith" || fn == "endsWith" || fn == "contains") && c.IsMemberFunction() && len(args) == 1:
		t, x := nativeStrOf(c.Target()), nativeStrOf(args[0])
		if t == nil || x == nil {
			return nil
		}
		test := strings.HasPrefix
		switch fn {
		case "endsWith":
			test = strings.HasSuffix
		case "contains":
			test = strings.Contains
		}
		return func(v *Vars) (bool, bool) {
			a, aok := t(v)
			if !aok {
				return false, false
			}
			b, bok := x(v)
			if !bok {
				return false, false
			}
			return test(a, b), true
		}
	case fn == "@in" && len(args) == 2:
		key, m := args[0], args[1]
		if key.Kind() != celast.LiteralKind || m.Kind() != celast.IdentKind || m.AsIdent() != varHeaders {
			return nil
		}
		name, ok := key.AsLiteral().(types.String)
		if !ok {
			return nil
		}
		var buf [64]byte
		canon, ok := canonicalInto(buf[:0], string(name))
		if !ok {
			return nil
		}
		h := string(canon)
		return func(v *Vars) (bool, bool) { return len(v.Header[h]) > 0, true }
	}
	return nil
}

// nativeConcat is the Go form of a chain of string concatenations of at
// most maxNativeTerms terms, each in the subset; a result longer than
// maxNativeConcat defers to CEL.
func nativeConcat(e celast.Expr) nativeStr {
	var terms []nativeStr
	var walk func(e celast.Expr) bool
	walk = func(e celast.Expr) bool {
		if e.Kind() == celast.CallKind {
			if c := e.AsCall(); c.FunctionName() == "_+_" && !c.IsMemberFunction() && len(c.Args()) == 2 {
				return walk(c.Args()[0]) && walk(c.Args()[1])
			}
		}
		if e.Kind() == celast.LiteralKind {
			if _, ok := e.AsLiteral().(types.String); !ok {
				return false // a list or bytes concatenation
			}
		}
		t := nativeStrOf(e)
		if t == nil || len(terms) == maxNativeTerms {
			return false
		}
		terms = append(terms, t)
		return true
	}
	if !walk(e) {
		return nil
	}
	return func(v *Vars) (string, bool) {
		var buf [maxNativeConcat]byte
		out := buf[:0]
		for _, t := range terms {
			s, ok := t(v)
			if !ok || len(out)+len(s) > maxNativeConcat {
				return "", false
			}
			out = append(out, s...)
		}
		return string(out), true
	}
}
