package expr

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
)

// TestNativeMatchesCEL holds the Go form of the subset to CEL's own
// evaluation: for every expression and every request below, the Go form
// gives CEL's value or defers to CEL (a missing header, a claim that is no
// plain string, a long concatenation), never another value nor a value
// where CEL fails. An expression outside the subset has no Go form.
func TestNativeMatchesCEL(t *testing.T) {
	bools := []string{
		`request.method == "POST" && request.path.startsWith("/v1/orders")`,
		`request.method != "GET" || request.path.endsWith(".json")`,
		`!(request.path.contains("admin"))`,
		`request.headers["x-tenant"] == "acme"`,
		`request.headers["x-tenant"] == "acme" && request.method == "GET"`,
		`request.method == "GET" && request.headers["x-tenant"] == "acme"`,
		`request.headers["x-tenant"] == "acme" || request.method == "GET"`,
		`request.method == "GET" || request.headers["x-tenant"] == "acme"`,
		`request.headers["x-a"] == "1" && request.headers["x-b"] == "2"`,
		`request.headers["x-a"] == "1" || request.headers["x-b"] == "2"`,
		`!(request.headers["x-a"] == "1")`,
		`"x-tenant" in request.headers && request.headers["X-TENANT"].startsWith("ac")`,
		`client.ip == "192.0.2.1" || client.kind == "api_key"`,
		`consumer.name == "" && consumer.plan == "" && route.name == "api" && client.id != ""`,
		`true && request.path == "/"`,
		`false || request.headers["x-a"].contains(request.headers["x-b"])`,
	}
	strs := []string{
		`request.headers["x-tenant"]`,
		`request.headers["X-Tenant"]`,
		`request.path`,
		`client.ip`,
		`"fixed"`,
		`request.headers["x-a"] + request.path`,
		`jwt.claims.org + ":" + request.headers["x-tenant"]`,
		`jwt.claims.org`,
		`request.method + "/" + request.headers["x-a"] + "/" + request.headers["x-big"]`,
		`"a" + "b" + "c" + "d" + "e" + "f" + "g" + "h"`,
	}
	outside := []string{
		`request.path.split("/")[1]`,
		`"a" + "b" + "c" + "d" + "e" + "f" + "g" + "h" + "i" == "x"`,
		`[1] + [2] == [1, 2]`,
		`request.query["a"] == "1"`,
		`request.headers[?"x-a"].orValue("") == ""`,
		`size(request.path) > 3`,
		`request.headers["x_a"] == "1"`,
	}
	reqs := []Vars{
		{Method: "POST", Path: "/v1/orders/3", Header: http.Header{"X-Tenant": {"acme"}}, Route: "api", ClientID: "k", ClientKind: "api_key"},
		{Method: "GET", Path: "/admin.json", Header: http.Header{}, IP: netip.MustParseAddr("192.0.2.1"), ClientKind: "ip"},
		{Method: "GET", Path: "/", Header: http.Header{"X-A": {"1"}, "X-B": {"2"}}},
		{Method: "PUT", Path: "/x", Header: http.Header{"X-A": {"0"}}},
		{Method: "GET", Path: "/", Header: http.Header{"X-B": {""}, "X-Tenant": {"acme", "other"}}},
		{},
		{Method: "GET", Path: "/c", Header: http.Header{"X-Tenant": {"t"}, "X-A": {"1"}, "X-Big": {strings.Repeat("b", 5000)}},
			Claims: map[string]json.RawMessage{"org": json.RawMessage(`"acme"`)}},
		{Method: "GET", Path: "/c", Header: http.Header{"X-Tenant": {"t"}, "X-A": {"1"}, "X-Big": {"small"}},
			Claims: map[string]json.RawMessage{"org": json.RawMessage(`"a\u0062c"`)}},
		{Method: "GET", Path: "/c", Header: http.Header{"X-Tenant": {"t"}},
			Claims: map[string]json.RawMessage{"org": json.RawMessage(`42`)}},
		{Method: "GET", Path: "/c", Header: http.Header{"X-Tenant": {"t"}},
			Claims: map[string]json.RawMessage{"org": json.RawMessage(`"é"`)}},
	}
	answered := 0
	check := func(text string, k Kind) {
		p, err := Compile(text, k)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if p.nb == nil && p.ns == nil {
			t.Errorf("%s: no Go form, want one", text)
			return
		}
		for i := range reqs {
			a, b := reqs[i], reqs[i]
			out, err := p.eval(&a)
			var nv any
			var nok bool
			if p.nb != nil {
				nv, nok = p.nb(&b)
			} else {
				nv, nok = p.ns(&b)
			}
			switch {
			case !nok:
				// The Go form defers to CEL: always allowed.
			case err != nil || types.IsError(out):
				t.Errorf("%s on request %d: Go form gave %v, CEL failed: %v", text, i, nv, err)
			case out.Value() != nv:
				t.Errorf("%s on request %d: Go form gave %v, CEL %v", text, i, nv, out.Value())
			default:
				answered++
			}
		}
	}
	for _, s := range bools {
		check(s, Bool)
	}
	for _, s := range strs {
		check(s, String)
	}
	if answered < 100 {
		t.Errorf("the Go form answered %d times, want most of the cases (it is the fast path)", answered)
	}
	for _, s := range outside {
		k := Bool
		if s == outside[0] {
			k = String
		}
		p, err := Compile(s, k)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if p.nb != nil || p.ns != nil {
			t.Errorf("%s: has a Go form, want CEL alone", s)
		}
	}
}
