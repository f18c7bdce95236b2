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
