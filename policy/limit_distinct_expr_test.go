package policy

import (
	"errors"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/expr"
)

// TestDistinctExprConfig is the table of distinct values read as key
// parts or as expressions: a key-part spelling is always the key part, any
// other value is compiled as a String expression, and one that is neither
// is refused with the field path and CEL's error.
func TestDistinctExprConfig(t *testing.T) {
	for _, tc := range []struct {
		distinct string
		expr     bool   // compiled as an expression
		body     bool   // the expression reads the body
		want     string // "" compiles
	}{
		{distinct: "ip"},
		{distinct: "client"},   // also a CEL map variable: the key part wins
		{distinct: "route"},    // likewise
		{distinct: "consumer"}, // likewise
		{distinct: "path"},
		{distinct: "ip/24"},
		{distinct: "header:X-Username"},
		{distinct: "body.username", expr: true, body: true},
		{distinct: `request.headers["x-username"]`, expr: true},
		{distinct: `client.ip + "|" + request.path`, expr: true},
		{distinct: `body.?user.?name.orValue("")`, expr: true, body: true},
		{distinct: "apikey", want: `limits[1].distinct: distinct "apikey": not a key part`},
		{distinct: "apikey", want: "undeclared reference to 'apikey'"},
		{distinct: "body.", want: "limits[1].distinct: distinct \"body.\""},
		{distinct: "[1, 2]", want: "has type list"},
		{distinct: "request.headers", want: "has type map"},
		{distinct: "ip/99", want: "want ip/<1..32>"},                                   // a key part's typo stays the key part's error
		{distinct: "header:X User", want: `distinct "header:X User": want a key part`}, // likewise
		{distinct: strings.Repeat("a+", expr.MaxLen) + "a", want: "limits[1].distinct"},
		{distinct: "true", want: "reads nothing of the request"}, // one value for every request: never denies
		{distinct: `'x' + "y"`, want: "reads nothing of the request"},
	} {
		t.Run(tc.distinct[:min(len(tc.distinct), 40)], func(t *testing.T) {
			p, err := Compile(distinctConfig(tc.distinct, "3/10m"), noEnv, os.ReadFile)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Compile = %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			l := p.Limits[1]
			isExpr := l.Exprs != nil && l.Exprs.Distinct != nil
			if isExpr != tc.expr || (l.Distinct == nil) != tc.expr {
				t.Fatalf("expression = %v, key part = %v; want expression %v", isExpr, l.Distinct != nil, tc.expr)
			}
			if isExpr && l.Exprs.Body != tc.body {
				t.Errorf("Body = %v, want %v", l.Exprs.Body, tc.body)
			}
		})
	}
	// An expression distinct on another algorithm is refused as a key part is.
	c := base()
	c.Limits[1].Distinct = "body.username"
	if _, err := Compile(c, noEnv, os.ReadFile); err == nil || !strings.Contains(err.Error(), `limits[1].distinct: applies only to algorithm "distinct"`) {
		t.Errorf("Compile = %v", err)
	}
}

// TestDistinctExprValue: an expression's result is hashed under a kind of
// its own (never the value a key part gives for the same text), equal
// results are one value, and the body field evaluates from the JSON body;
// a body that is not JSON is an error (on_error decides).
func TestDistinctExprValue(t *testing.T) {
	p, err := Compile(distinctConfig("body.username", "3/10m"), noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limits[1]
	id := &keys.Identity{IP: netip.MustParseAddr("192.0.2.1")}
	val := func(s string) uint64 {
		h, ok := l.DistinctValue(p.Identity, id, &keys.Values{}, "/login", s)
		if !ok {
			t.Fatalf("%q: not ok", s)
		}
		return h
	}
	if a1, a2 := val("alice"), val("alice"); a1 != a2 || a1 == val("bob") || val("") == val("-") || val("") == val("alice") {
		t.Error("expression values: equal results must be one value, others two")
	}
	ipLim, err := Compile(distinctConfig("ip", "3/10m"), noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	ipv, _ := ipLim.Limits[1].DistinctValue(ipLim.Identity, id, &keys.Values{}, "/login", "")
	if ipv == val("192.0.2.1") {
		t.Error("an expression giving the client's address counts as the ip part's value")
	}
	hdrLim, err := Compile(distinctConfig("header:X-Username", "3/10m"), noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	hv, _ := hdrLim.Limits[1].DistinctValue(hdrLim.Identity, id, &keys.Values{Header: http.Header{"X-Username": {"alice"}}}, "/login", "")
	if hv == val("alice") {
		t.Error("an expression giving a header's value counts as the header part's value")
	}
	for _, tc := range []struct {
		body    string
		bodyErr error
		want    string // "" with wantErr
		wantErr bool
	}{
		{body: `{"username":"alice","password":"x"}`, want: "alice"},
		{body: `{"username":42}`, want: "42"},
		{body: `{"password":"x"}`, wantErr: true},
		{body: `[]`, wantErr: true},
		{body: `not json`, wantErr: true},
		{bodyErr: errors.New("not JSON"), wantErr: true},
	} {
		v := &expr.Vars{Body: []byte(tc.body), BodyErr: tc.bodyErr}
		got, err := l.Exprs.Distinct.String(v)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("body %q: %q, %v; want %q (error %v)", tc.body, got, err, tc.want, tc.wantErr)
		}
	}
}
