package expr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strconv"
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

	ip                 string
	hm                 headerMap
	query, claims, bod ref.Val
	strictQuery        ref.Val
}

var _ interpreter.Activation = (*Vars)(nil)

// Reset clears v for another request.
func (v *Vars) Reset() { *v = Vars{} }

// ResolveName implements interpreter.Activation.
func (v *Vars) ResolveName(name string) (any, bool) {
	switch name {
	case varMethod:
		return methodValue(v.Method), true
	case varPath:
		return types.String(v.Path), true
	case varHeaders:
		if v.hm.h == nil {
			v.hm.h = v.Header
			if v.hm.h == nil {
				v.hm.h = http.Header{}
			}
		}
		return &v.hm, true
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

// LooseQuery switches request.query to the other reading upstreams make
// of the query string: ';' separating pairs as '&' does (Rack before 3,
// old Python), and the last value of a repeated name (PHP, many
// frameworks) rather than the first. It reports false, changing nothing,
// when the query has a single pair, which reads one way. StrictQuery
// switches back.
func (v *Vars) LooseQuery() bool {
	if !strings.ContainsAny(v.RawQuery, "&;") {
		return false
	}
	v.strictQuery, v.query = v.query, lastValues(strings.ReplaceAll(v.RawQuery, ";", "&"))
	return true
}

// StrictQuery undoes LooseQuery.
func (v *Vars) StrictQuery() { v.query, v.strictQuery = v.strictQuery, nil }

// lastValues is the query's last value of each name.
func lastValues(raw string) ref.Val {
	q, _ := url.ParseQuery(raw)
	m := make(map[string]string, len(q))
	for k, vs := range q {
		if len(vs) > 0 {
			m[k] = vs[len(vs)-1]
		}
	}
	return types.NewStringStringMap(types.DefaultTypeAdapter, m)
}

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
		if x, err := decodeJSON(r); err == nil {
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
	x, err := decodeJSON(b)
	if err != nil {
		return types.NewErr("body is not JSON: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(x)
}

// decodeJSON decodes one JSON value as json.Unmarshal does into an any
// (an object's repeated name: the last value, as most upstreams read
// it), except numbers: one written without a fraction or an exponent
// that fits 64 bits is an int (or a uint past int64), exact; any other is
// a double. Read as doubles, integers past 2^53 (64-bit user ids) would
// be rounded, and two users' ids would key one counter.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return jsonNumbers(x)
}

// jsonNumbers replaces, in place, the json.Numbers in x by int64, uint64
// or float64 values (decodeJSON). A number past a double's range is an
// error, as json.Unmarshal makes it.
func jsonNumbers(x any) (any, error) {
	var err error
	switch v := x.(type) {
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", s)
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			if v[k], err = jsonNumbers(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range v {
			if v[i], err = jsonNumbers(e); err != nil {
				return nil, err
			}
		}
	}
	return x, nil
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
	var vs []string
	var buf [64]byte
	if c, ok := canonicalInto(buf[:0], string(k)); ok {
		vs = m.h[string(c)] // looked up without allocating the name
	} else {
		vs = m.h[http.CanonicalHeaderKey(string(k))]
	}
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

// canonicalInto appends the canonical form of a header name of at most
// cap(dst) token bytes (as net/http's CanonicalHeaderKey writes it) to
// dst; ok is false for a longer name or one with a byte that is not a
// letter, digit or '-', which the caller canonicalizes the slow way.
func canonicalInto(dst []byte, s string) ([]byte, bool) {
	if len(s) > cap(dst) {
		return dst, false
	}
	upper := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z':
			if upper {
				c -= 'a' - 'A'
			}
		case 'A' <= c && c <= 'Z':
			if !upper {
				c += 'a' - 'A'
			}
		case '0' <= c && c <= '9' || c == '-':
		default:
			return dst, false
		}
		dst = append(dst, c)
		upper = c == '-'
	}
	return dst, true
}

// methods are the common methods as CEL values, boxed once: a method is
// read by most conditions, and boxing it would allocate per request.
// Read-only.
var methods = func() map[string]ref.Val {
	m := map[string]ref.Val{}
	for _, name := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		m[name] = types.String(name)
	}
	return m
}()

func methodValue(m string) ref.Val {
	if v, ok := methods[m]; ok {
		return v
	}
	return types.String(m)
}
