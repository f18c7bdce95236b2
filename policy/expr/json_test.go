package expr

import (
	"encoding/json"
	"testing"
)

// TestJSONNumbers: the numbers of claims and bodies as expressions see
// them. Integers are exact to 64 bits (two 64-bit ids never compare or
// key alike), other numbers are doubles, an object's repeated name reads
// its last value (as JavaScript, Python and Go upstreams read it), and a
// number or text json.Unmarshal refuses is still refused. The wanted
// values are written out, not computed by the decoder under test.
func TestJSONNumbers(t *testing.T) {
	cases := []struct {
		claims, body, expr, want string
	}{
		{`{"uid":9007199254740993}`, ``, `string(jwt.claims.uid)`, "9007199254740993"},
		{`{"uid":9007199254740992}`, ``, `string(jwt.claims.uid)`, "9007199254740992"},
		{`{"uid":1152921504606847000}`, ``, `jwt.claims.uid`, "1152921504606847000"},
		{`{"uid":18446744073709551615}`, ``, `jwt.claims.uid`, "18446744073709551615"},
		{`{"uid":18446744073709551616}`, ``, `jwt.claims.uid`, "1.8446744073709552e+19"},
		{`{"n":42}`, ``, `jwt.claims.n + 1`, "43"},
		{`{"n":42}`, ``, `jwt.claims.n > 41.5`, "true"},
		{`{"n":-0}`, ``, `jwt.claims.n`, "0"},
		{`{"n":1.5}`, ``, `jwt.claims.n`, "1.5"},
		{`{"n":1e2}`, ``, `jwt.claims.n`, "100"},
		{`{"n":2.0}`, ``, `jwt.claims.n == 2`, "true"},
		{`{"n":1e400}`, ``, `has(jwt.claims.n)`, "false"},
		{`{"n":[1, 2.5, {"m": 3}]}`, ``, `string(jwt.claims.n[0]) + "/" + string(jwt.claims.n[2].m)`, "1/3"},
		{``, `{"user":"a","user":"b"}`, `body.user`, "b"},
		{``, `{"id":9007199254740993}`, `body.id`, "9007199254740993"},
		{``, `{"id":1} {"id":2}`, `body.id`, "error"},
		{``, `{"id":1},`, `body.id`, "error"},
		{``, `{"id":1e400}`, `body.id`, "error"},
		{``, `  {"id":1}  `, `body.id`, "1"},
	}
	for _, c := range cases {
		v := &Vars{}
		if c.claims != "" {
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.claims), &raw); err != nil {
				t.Fatal(err)
			}
			v.Claims = raw
		}
		if c.body != "" {
			v.Body = []byte(c.body)
		}
		p, err := Compile(c.expr, String)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, err := p.String(v)
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("claims %s body %s: %s = %q (%v), want %q", c.claims, c.body, c.expr, got, err, c.want)
		}
	}
}

// TestLooseQuery: the other reading of a query string, written out; a
// single pair has none, and StrictQuery restores the first values.
func TestLooseQuery(t *testing.T) {
	p, err := Compile(`request.query[?"b"].orValue("-")`, String)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ raw, strict, loose string }{
		{"b=1", "1", ""},
		{"b=0&b=1", "0", "1"},
		{"b=1;x=2", "-", "1"},
		{"x=1;b=2&b=3", "3", "3"},
		{"a=1&c=2", "-", "-"},
	} {
		v := &Vars{RawQuery: c.raw}
		got, _ := p.String(v)
		if got != c.strict {
			t.Errorf("%s: %q, want %q", c.raw, got, c.strict)
		}
		if !v.LooseQuery() {
			if c.loose != "" {
				t.Errorf("%s: no loose reading, want %q", c.raw, c.loose)
			}
			continue
		}
		if got, _ := p.String(v); got != c.loose {
			t.Errorf("%s loosely: %q, want %q", c.raw, got, c.loose)
		}
		v.StrictQuery()
		if got, _ := p.String(v); got != c.strict {
			t.Errorf("%s restored: %q, want %q", c.raw, got, c.strict)
		}
	}
}
