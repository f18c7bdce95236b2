package expr

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// The variables' names as expressions spell them.
const (
	varMethod     = "request.method"
	varPath       = "request.path"
	varHeaders    = "request.headers"
	varQuery      = "request.query"
	varClientIP   = "client.ip"
	varClientID   = "client.id"
	varClientKind = "client.kind"
	varConsumer   = "consumer.name"
	varPlan       = "consumer.plan"
	varClaims     = "jwt.claims"
	varRoute      = "route.name"
	varBody       = "body"
)

// Vars are one request's variables. The caller fills the exported
// fields; the maps CEL sees (headers, query, claims, body) are built on
// first use and kept for the request's other expressions. Reset before
// reuse. Not safe for concurrent use.
type Vars struct {
	// Method is the request method; Path its normal path (the one the
	// route matched).
	Method, Path string
	// Header is the request's header (read, never changed).
	Header http.Header
	// RawQuery is the request's query string, undecoded.
	RawQuery string
	// IP is the client IP; ClientID the client identity's value and
	// ClientKind its source ("api_key", "user", "ip", ...).
	IP                   netip.Addr
	ClientID, ClientKind string
	// Consumer and Plan name the registered consumer and the plan, "" for
	// none.
	Consumer, Plan string
	// Claims are the claims of a verified bearer token, nil without one.
	Claims map[string]json.RawMessage
	// Route is the matched route's name.
	Route string
	// Body is the request body as read for expressions, and BodyErr why
	// it is not a JSON value to offer (not JSON, too large, unread):
	// expressions reading body then fail with it.
	Body    []byte
	BodyErr error

	ip                          string
	headers, query, claims, bod ref.Val
}

var _ interpreter.Activation = (*Vars)(nil)

// Reset clears v for another request.
func (v *Vars) Reset() { *v = Vars{} }

// ResolveName implements interpreter.Activation.
func (v *Vars) ResolveName(name string) (any, bool) {
	switch name {
	case varMethod:
		return types.String(v.Method), true
	case varPath:
		return types.String(v.Path), true
	case varHeaders:
		if v.headers == nil {
			v.headers = &headerMap{h: v.Header}
		}
		return v.headers, true
	case varQuery:
		if v.query == nil {
			v.query = firstValues(v.RawQuery)
		}
		return v.query, true
	case varClientIP:
		if v.ip == "" && v.IP.IsValid() {
			v.ip = v.IP.String()
		}
		return types.String(v.ip), true
	case varClientID:
		return types.String(v.ClientID), true
	case varClientKind:
		return types.String(v.ClientKind), true
	case varConsumer:
		return types.String(v.Consumer), true
	case varPlan:
		return types.String(v.Plan), true
	case varClaims:
		if v.claims == nil {
			v.claims = claimsValue(v.Claims)
		}
		return v.claims, true
	case varRoute:
		return types.String(v.Route), true
	case varBody:
		if v.bod == nil {
			v.bod = bodyValue(v.Body, v.BodyErr)
		}
		return v.bod, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (v *Vars) Parent() interpreter.Activation { return nil }

// firstValues is the query's first value of each name. A malformed pair
// is skipped, as url.ParseQuery skips it.
func firstValues(raw string) ref.Val {
	q, _ := url.ParseQuery(raw)
	m := make(map[string]string, len(q))
	for k, vs := range q {
		if len(vs) > 0 {
			m[k] = vs[0]
		}
	}
	return types.NewStringStringMap(types.DefaultTypeAdapter, m)
}

// claimsValue decodes a verified token's claims; a claim that does not
// decode is left out.
func claimsValue(raw map[string]json.RawMessage) ref.Val {
	m := make(map[string]any, len(raw))
	for k, r := range raw {
		var x any
		if json.Unmarshal(r, &x) == nil {
			m[k] = x
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(m)
}

// bodyValue decodes the body as one JSON value, or is the error that
// says why there is none.
func bodyValue(b []byte, err error) ref.Val {
	if err != nil {
		return types.NewErr("body: %v", err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return types.NewErr("body is not JSON: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(x)
}

// headerMap is request.headers: lower-case names to first values, read
// straight from the http.Header on a lookup; the whole map (for size,
// iteration, comparison) is built only when an expression asks for it.
type headerMap struct {
	h    http.Header
	full traits.Mapper
}

var _ traits.Mapper = (*headerMap)(nil)

func (m *headerMap) all() traits.Mapper {
	if m.full == nil {
		f := make(map[string]string, len(m.h))
		for k, vs := range m.h {
			if len(vs) > 0 {
				f[strings.ToLower(k)] = vs[0]
			}
		}
		m.full = types.NewStringStringMap(types.DefaultTypeAdapter, f)
	}
	return m.full
}

// Find looks a name up case-insensitively, as HTTP names compare.
func (m *headerMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	vs := m.h[http.CanonicalHeaderKey(string(k))]
	if len(vs) == 0 {
		return nil, false
	}
	return types.String(vs[0]), true
}

func (m *headerMap) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if found {
		return v
	}
	if v != nil {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

func (m *headerMap) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found && v != nil {
		return v
	}
	return types.Bool(found)
}

func (m *headerMap) Iterator() traits.Iterator { return m.all().Iterator() }
func (m *headerMap) Size() ref.Val             { return m.all().Size() }
func (m *headerMap) ConvertToNative(t reflect.Type) (any, error) {
	return m.all().ConvertToNative(t)
}
func (m *headerMap) ConvertToType(t ref.Type) ref.Val { return m.all().ConvertToType(t) }
func (m *headerMap) Equal(o ref.Val) ref.Val          { return m.all().Equal(o) }
func (m *headerMap) Type() ref.Type                   { return types.MapType }
func (m *headerMap) Value() any                       { return m.all().Value() }
