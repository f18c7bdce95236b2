package expr

import (
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// The common conditions and keys (comparisons, prefixes and header
// lookups of the request's strings, joined by &&, || and !) are compiled
// to Go closures as well, which give CEL's answer without its
// interpreter: no activation, no value boxed. Any other expression runs
// on CEL alone. The subset cannot loop nor build strings, so it needs no
// cost bound; TestNativeMatchesCEL holds it to CEL's results, errors
// included.

// nativeStr is a string-valued subexpression; ok is false where CEL
// would fail (a header indexed that the request lacks).
type nativeStr func(v *Vars) (s string, ok bool)

// nativeBool is a bool-valued subexpression; ok as for nativeStr.
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

func nativeStrOf(e celast.Expr) nativeStr {
	switch e.Kind() {
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
