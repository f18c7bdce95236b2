package expr

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
)

// TestNativeMatchesCELRandom generates expressions of the Go subset
// (comparisons, prefixes, header lookups in every spelling, claims of
// every JSON type, concatenations, literals with escapes and non-ASCII
// text, && / || / ! with failures on either side) and requests (headers
// missing, empty, repeated, non-UTF-8; claims absent, of other types,
// escaped), and holds the Go form to CEL: where it answers, CEL succeeds
// with the same value. The oracle is CEL's interpreter, not the Go form.
func TestNativeMatchesCELRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1))
	headerNames := []string{"x-a", "X-A", "x-A", "X-b", "x_a", "content-type", "x-é", "X-LONG-" + strings.Repeat("n", 70)}
	lits := []string{`""`, `"a"`, `"é"`, `"\u00e9"`, `"\xe9"`, `"a\"b"`, `"\x41"`, `"/v1"`, `"GET"`, `'\\'`, `"\u0000"`, `r"\n"`, `"\t"`}
	strVars := []string{"request.method", "request.path", "client.ip", "client.id", "client.kind", "consumer.name", "consumer.plan", "route.name",
		"jwt.claims.org", "jwt.claims.n", "jwt.claims.missing"}
	var genStr func(d int) string
	genStr = func(d int) string {
		switch n := rng.IntN(10); {
		case n < 3:
			return strVars[rng.IntN(len(strVars))]
		case n < 6:
			return `request.headers["` + headerNames[rng.IntN(len(headerNames))] + `"]`
		case n < 8 || d > 2:
			return lits[rng.IntN(len(lits))]
		default:
			return genStr(d+1) + " + " + genStr(d+1)
		}
	}
	var genBool func(d int) string
	genBool = func(d int) string {
		n := rng.IntN(12)
		if d > 3 && n >= 7 {
			n = rng.IntN(7)
		}
		switch n {
		case 0:
			return genStr(d) + " == " + genStr(d)
		case 1:
			return genStr(d) + " != " + genStr(d)
		case 2:
			return "(" + genStr(d) + ").startsWith(" + genStr(d) + ")"
		case 3:
			return "(" + genStr(d) + ").endsWith(" + genStr(d) + ")"
		case 4:
			return "(" + genStr(d) + ").contains(" + genStr(d) + ")"
		case 5:
			return `"` + headerNames[rng.IntN(len(headerNames))] + `" in request.headers`
		case 6:
			return []string{"true", "false"}[rng.IntN(2)]
		case 7:
			return "!(" + genBool(d+1) + ")"
		case 8, 9:
			return "(" + genBool(d+1) + " && " + genBool(d+1) + ")"
		default:
			return "(" + genBool(d+1) + " || " + genBool(d+1) + ")"
		}
	}
	values := []string{"", "a", "é", "\xe9", "\xff", "GET", "/v1", "a\"b", "A", "\x00", " a "}
	claimVals := []string{`"acme"`, `"a"`, `""`, `"é"`, `"\u00e9"`, `"a\"b"`, `"\u0041"`, `42`, `null`, `true`, `{"x":1}`, `["a"]`, `"GET"`}
	genVars := func() Vars {
		v := Vars{Method: values[rng.IntN(len(values))], Path: values[rng.IntN(len(values))], Route: values[rng.IntN(len(values))],
			ClientID: values[rng.IntN(len(values))], ClientKind: values[rng.IntN(len(values))],
			Consumer: values[rng.IntN(len(values))], Plan: values[rng.IntN(len(values))], Header: http.Header{}}
		if rng.IntN(2) == 0 {
			v.IP = netip.MustParseAddr([]string{"192.0.2.1", "::ffff:192.0.2.1", "2001:db8::1"}[rng.IntN(3)])
		}
		for _, name := range []string{"X-A", "X-B", "Content-Type"} {
			for k := rng.IntN(3); k > 0; k-- {
				v.Header[name] = append(v.Header[name], values[rng.IntN(len(values))])
			}
		}
		if rng.IntN(4) > 0 {
			v.Claims = map[string]json.RawMessage{}
			for _, name := range []string{"org", "n"} {
				if rng.IntN(4) > 0 {
					v.Claims[name] = json.RawMessage(claimVals[rng.IntN(len(claimVals))])
				}
			}
		}
		return v
	}
	answered, compared := 0, 0
	for i := 0; i < 3000; i++ {
		k, text := Bool, genBool(0)
		if i%4 == 0 {
			k, text = String, genStr(0)
		}
		p, err := Compile(text, k)
		if err != nil || (p.nb == nil && p.ns == nil) {
			continue // outside the subset (a dyn claim compared, a name with '_')
		}
		for j := 0; j < 8; j++ {
			a := genVars()
			b := a
			out, err := p.eval(&a)
			var nv any
			var nok bool
			if p.nb != nil {
				nv, nok = p.nb(&b)
			} else {
				nv, nok = p.ns(&b)
			}
			compared++
			switch {
			case !nok:
			case err != nil || types.IsError(out):
				t.Fatalf("%s on %+v: Go form gave %v, CEL failed: %v", text, a, nv, err)
			case out.Value() != nv:
				t.Fatalf("%s on %+v: Go form gave %#v, CEL %#v", text, a, nv, out.Value())
			default:
				answered++
			}
		}
	}
	if answered < compared/4 {
		t.Errorf("the Go form answered %d of %d, want a fair share (the generator should stay in the subset)", answered, compared)
	}
	t.Logf("compared %d, the Go form answered %d", compared, answered)
}
