package expr

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHostile tables the expressions and requests an attacker (or a
// careless operator) can bring, and the defined outcome of each: a load
// error, a run-time error (which the limit's on_error then handles) or a
// value. None may hang, panic or allocate without bound; a generous hang
// guard fails the test if one runs on.
func TestHostile(t *testing.T) {
	long := strings.Repeat("a", 2000)
	huge := strings.Repeat("h", 1<<20)
	deep := strings.Repeat("[", 40_000) + strings.Repeat("]", 40_000)
	ten := "[1,2,3,4,5,6,7,8,9,10]"
	cases := []struct {
		name    string
		text    string
		kind    Kind
		vars    Vars
		loadErr string // the Compile error, or
		evalErr string // the run-time error, or
		want    any    // the value
	}{
		{name: "loop: nested comprehensions over a long path stop at the cost limit",
			text: `request.path.split("").map(a, request.path.split("").map(b, request.path.split("").map(c, c))).size() > 0`,
			kind: Bool, vars: Vars{Path: long}, evalErr: "cost limit exceeded"},
		{name: "explosion: constant lists nested five deep stop at the cost limit",
			text: ten + ".map(a, " + ten + ".map(b, " + ten + ".map(c, " + ten + ".map(d, " + ten + ".map(e, 1))))).size() > 0",
			kind: Bool, evalErr: "cost limit exceeded"},
		{name: "huge string: a 1 MiB header is a value (hashed into the key)",
			text: `request.headers["x-big"]`, kind: String, vars: Vars{Header: http.Header{"X-Big": {huge}}}, want: huge},
		{name: "huge string: concatenating it stops at the cost limit",
			text: `request.headers["x-big"] + request.headers["x-big"] + request.headers["x-big"] + request.headers["x-big"]`,
			kind: String, vars: Vars{Header: http.Header{"X-Big": {huge}}}, evalErr: "cost limit exceeded"},
		{name: "amplifier: replace is refused at load",
			text: `request.path.replace("a", request.headers["x"])`, kind: String, loadErr: "replace is not allowed"},
		{name: "amplifier: join is refused at load",
			text: `request.path.split("").map(c, request.headers["x"]).join("")`, kind: String, loadErr: "join is not allowed"},
		{name: "amplifier: format is refused at load",
			text: `"%s%s".format([request.path, request.path])`, kind: String, loadErr: "format is not allowed"},
		{name: "regex from the request is refused at load",
			text: `request.path.matches(request.headers["x-re"])`, kind: Bool, loadErr: "matches needs a literal pattern"},
		{name: "literal regex runs (RE2: linear time)",
			text: `request.path.matches("^(a+)+$")`, kind: Bool, vars: Vars{Path: long + "!"}, want: false},
		{name: "missing header indexed: run-time error",
			text: `request.headers["x-tenant"]`, kind: String, vars: Vars{Header: http.Header{}}, evalErr: "no such key"},
		{name: "missing header tested: false",
			text: `"x-tenant" in request.headers`, kind: Bool, vars: Vars{Header: http.Header{}}, want: false},
		{name: "missing header with a default: the default",
			text: `request.headers[?"x-tenant"].orValue("none")`, kind: String, vars: Vars{Header: http.Header{}}, want: "none"},
		{name: "header names compare case-insensitively, first value",
			text: `request.headers["X-TENANT"]`, kind: String, vars: Vars{Header: http.Header{"X-Tenant": {"a", "b"}}}, want: "a"},
		{name: "type error at run time: int of a non-number",
			text: `int(request.headers["x-batch"])`, kind: Int, vars: Vars{Header: http.Header{"X-Batch": {"abc"}}}, evalErr: "type conversion error"},
		{name: "type error at run time: a dyn claim of the wrong type",
			text: `jwt.claims.n + 1 > 2`, kind: Bool, vars: Vars{Claims: map[string]json.RawMessage{"n": json.RawMessage(`"x"`)}}, evalErr: "no such overload"},
		{name: "no verified token: no claims",
			text: `jwt.claims.org`, kind: String, evalErr: "no such key"},
		{name: "cost out of range: a double too large",
			text: `double(request.headers["x-batch"])`, kind: Int, vars: Vars{Header: http.Header{"X-Batch": {"1e300"}}}, evalErr: "not an integer"},
		{name: "body that is not JSON: run-time error",
			text: `body.user`, kind: String, vars: Vars{Body: []byte(`{"user":`)}, evalErr: "body is not JSON"},
		{name: "body not offered (too long, not JSON content, never ended): its reason",
			text: `body.user`, kind: String, vars: Vars{BodyErr: errors.New("the request body is larger than 65536 bytes")}, evalErr: "larger than 65536"},
		{name: "deep JSON body: a decode error, no stack exhausted",
			text: `body.size() > 0`, kind: Bool, vars: Vars{Body: []byte(deep)}, evalErr: "body is not JSON"},
		{name: "wrong static type refused at load",
			text: `request.method`, kind: Bool, loadErr: "has type string, want bool"},
		{name: "unknown variable refused at load",
			text: `request.cookies["a"]`, kind: String, loadErr: "undeclared reference to 'request' (in container '')  | request.cookies[\"a\"]  | ^ (the variables are request.method, request.path"},
		{name: "expression longer than MaxLen refused at load",
			text: `"` + strings.Repeat("a", MaxLen) + `"`, kind: String, loadErr: "more than 4096"},
		{name: "deeply nested expression refused by the parser",
			text: strings.Repeat("(", 500) + "true" + strings.Repeat(")", 500), kind: Bool, loadErr: "ERROR"},
		{name: "malformed query escapes are skipped",
			text: `request.query[?"a"].orValue("-") + request.query[?"b"].orValue("-")`, kind: String, vars: Vars{RawQuery: "a=%zz&b=2"}, want: "-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				p, err := Compile(tc.text, tc.kind)
				if tc.loadErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
						t.Errorf("Compile = %v, want an error containing %q", err, tc.loadErr)
					}
					return
				}
				if err != nil {
					t.Errorf("Compile: %v", err)
					return
				}
				v := tc.vars
				var got any
				switch tc.kind {
				case Bool:
					got, err = p.Bool(&v)
				case String:
					got, err = p.String(&v)
				case Int:
					got, err = p.Int(&v)
				}
				switch {
				case tc.evalErr != "":
					if err == nil || !strings.Contains(err.Error(), tc.evalErr) {
						t.Errorf("eval = %.60v, %v; want an error containing %q", got, err, tc.evalErr)
					}
				case err != nil:
					t.Errorf("eval: %v", err)
				case got != tc.want:
					t.Errorf("eval = %.60v, want %.60v", got, tc.want)
				}
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("hang guard: still running after a minute")
			}
		})
	}
}
