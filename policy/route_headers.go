package policy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

// Bounds of one request_headers or response_headers table: a header rule
// is configuration, not a way to make every request megabytes larger.
const (
	maxHeaderRules     = 64   // names in each of set, add and remove
	maxHeaderNameLen   = 256  // bytes of a header name
	maxHeaderValueLen  = 4096 // bytes of a value template
	maxHeaderRuleBytes = 16 << 10
)

// HeaderRules is a compiled request_headers or response_headers table.
// Rules apply in the order remove, set, add.
type HeaderRules struct {
	// Remove are canonical header names to delete.
	Remove []string
	// Set replace each named header with its value.
	Set []HeaderRule
	// Add append their value to the named header.
	Add []HeaderRule
	// Needs are the per-request values the templates name (a set of
	// TemplateField bits), so that the proxy resolves only those.
	Needs TemplateField
}

// HeaderRule is one header of a set or add list.
type HeaderRule struct {
	// Name is the header's canonical name.
	Name string
	// Value is its value template.
	Value Template
}

// TemplateField is a per-request value a template names, as a bit.
type TemplateField uint8

// The fields a header value may name.
const (
	// FieldClient is {client}: the client as the access log shows it (a
	// consumer's name, otherwise a hash unless access_log.raw_client; an
	// API key always hashed).
	FieldClient TemplateField = 1 << iota
	// FieldConsumer is {consumer}: the registered consumer's name.
	FieldConsumer
	// FieldPlan is {plan}: the client's plan.
	FieldPlan
	// FieldRequestID is {request_id}: the request's X-Request-Id.
	FieldRequestID
)

// NeedsIdentity reports whether f names a value of the client's identity.
func (f TemplateField) NeedsIdentity() bool {
	return f&(FieldClient|FieldConsumer|FieldPlan) != 0
}

// templateFields are the names a template may use in braces; {route} is
// replaced when the route is compiled.
var templateFields = map[string]TemplateField{
	"client": FieldClient, "consumer": FieldConsumer, "plan": FieldPlan, "request_id": FieldRequestID,
}

// Template is a compiled header value: literal text and fields.
type Template struct {
	parts []templatePart
	// Static is the value as a header's value slice when the template
	// names no per-request field: built once, shared read-only.
	Static []string
}

type templatePart struct {
	lit   string
	field TemplateField // 0: lit
}

// TemplateValues are a request's values for Template.Expand, raw:
// Expand escapes them.
type TemplateValues struct {
	// Client is {client}, already in the access log's form.
	Client string
	// Consumer and Plan are {consumer} and {plan}, "" for none.
	Consumer, Plan string
	// RequestID is {request_id}.
	RequestID string
}

// Expand returns the template's value for v. A field's value is escaped
// so that it cannot end the header or start another: a byte outside
// printable ASCII, and '%', become %XX (a JWT claim or a header may hold
// anything).
func (t *Template) Expand(v *TemplateValues) string {
	if t.Static != nil {
		return t.Static[0]
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch p.field {
		case 0:
			b.WriteString(p.lit)
		case FieldClient:
			appendEscaped(&b, v.Client)
		case FieldConsumer:
			appendEscaped(&b, v.Consumer)
		case FieldPlan:
			appendEscaped(&b, v.Plan)
		case FieldRequestID:
			appendEscaped(&b, v.RequestID)
		}
	}
	return b.String()
}

const hexUpper = "0123456789ABCDEF"

func appendEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexUpper[c>>4])
			b.WriteByte(hexUpper[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// headerOwners says which headers belong to the gateway for a route: the
// names a header rule may not touch.
type headerOwners struct {
	// named are further owned names (the identity's user header, the
	// consumer and plan forward headers), folded (foldName).
	named []string
}

// Owned request headers: the identity and client-address headers the
// proxy strips from every request (keep in step with the proxy's list; a
// proxy test checks every name there is refused here), the request id,
// Host and Content-Length (framing the gateway computes).
var ownedExact = []string{
	"x-real-ip", "x-client-ip", "true-client-ip", "cf-connecting-ip", "x-gateway-user", "x-consumer-id",
	// path and method overrides: the upstream would serve another path or
	// method than the one the route and its limits judged
	"x-original-url", "x-rewrite-url", "x-http-method-override", "x-http-method", "x-method-override",
	"forwarded", "x-request-id", "host", "content-length",
	// hop-by-hop: they describe one connection, not the message
	"connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer",
}

// ownedPrefixes are owned header families.
var ownedPrefixes = []string{"x-forwarded-", "proxy-"}

// Owned in answers as well: what the rate-limit headers say is the
// gateway's word.
var (
	ownedResponseExact    = []string{"ratelimit", "ratelimit-policy", "retry-after"}
	ownedResponsePrefixes = []string{"x-ratelimit-"}
)

// foldName lower-cases an ASCII header name and reads '_' as '-', the way
// CGI, WSGI, PHP and Rack read it (HTTP_X_REAL_IP).
func foldName(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c == '_':
			b[i] = '-'
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ownedBy returns why the header name is the gateway's ("" when a rule may
// touch it). response judges a response header; cors says the route
// answers CORS itself.
func (o *headerOwners) ownedBy(name string, response, cors bool) string {
	f := foldName(name)
	if slices.Contains(ownedExact, f) || slices.Contains(o.named, f) {
		return "is a header the gateway owns"
	}
	for _, p := range ownedPrefixes {
		if strings.HasPrefix(f, p) {
			return "is a header the gateway owns (" + p + "*)"
		}
	}
	if !response {
		return ""
	}
	if slices.Contains(ownedResponseExact, f) {
		return "is a rate-limit header the gateway owns"
	}
	for _, p := range ownedResponsePrefixes {
		if strings.HasPrefix(f, p) {
			return "is a rate-limit header the gateway owns (" + p + "*)"
		}
	}
	if cors && strings.HasPrefix(f, "access-control-") {
		return "is a CORS header the gateway owns on a route with cors"
	}
	return ""
}

// buildHeaderRules compiles a request_headers (response false) or
// response_headers table of the route named route.
func buildHeaderRules(c *config.HeaderRulesConfig, path, route string, response, cors bool, o *headerOwners, e *problems) *HeaderRules {
	if c == nil {
		return nil
	}
	rules := &HeaderRules{}
	total := 0
	seen := map[string]string{} // canonical name → the list it was named in
	name := func(list, n string) (string, bool) {
		p := fmt.Sprintf("%s.%s[%q]", path, list, n)
		switch {
		case len(n) > maxHeaderNameLen:
			e.add(p, "header name longer than %d bytes", maxHeaderNameLen)
			return "", false
		case !keys.IsToken(n):
			e.add(p, "invalid header name %q (a token: letters, digits and !#$%%&'*+-.^_`|~)", n)
			return "", false
		}
		if why := o.ownedBy(n, response, cors); why != "" {
			e.add(p, "%q %s: header rules cannot set, add or remove it", n, why)
			return "", false
		}
		cn := http.CanonicalHeaderKey(n)
		if prev, dup := seen[cn]; dup && (prev == list || list == "remove" || prev == "remove") {
			e.add(p, "%q is named twice (also in %s)", n, prev)
			return "", false
		}
		seen[cn] = list
		return cn, true
	}
	for _, list := range []string{"set", "add"} {
		m := c.Set
		if list == "add" {
			m = c.Add
		}
		if len(m) > maxHeaderRules {
			e.add(path+"."+list, "at most %d headers, got %d", maxHeaderRules, len(m))
			continue
		}
		for _, n := range slices.Sorted(mapKeys(m)) {
			v := m[n]
			cn, ok := name(list, n)
			if !ok {
				continue
			}
			total += len(n) + len(v)
			t, err := parseTemplate(v, route)
			if err != "" {
				e.add(fmt.Sprintf("%s.%s[%q]", path, list, n), "%s", err)
				continue
			}
			rules.Needs |= t.needs()
			r := HeaderRule{Name: cn, Value: t}
			if list == "set" {
				rules.Set = append(rules.Set, r)
			} else {
				rules.Add = append(rules.Add, r)
			}
		}
	}
	if len(c.Remove) > maxHeaderRules {
		e.add(path+".remove", "at most %d headers, got %d", maxHeaderRules, len(c.Remove))
	} else {
		for _, n := range c.Remove {
			if cn, ok := name("remove", n); ok {
				rules.Remove = append(rules.Remove, cn)
			}
		}
	}
	if total > maxHeaderRuleBytes {
		e.add(path, "names and values total %d bytes, at most %d", total, maxHeaderRuleBytes)
	}
	return rules
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// parseTemplate compiles a header value: {name} names a field, {{ and }}
// are literal braces; {route} becomes the route's name. The literal text
// must be a valid header value (no CR, LF, NUL or other control byte but
// tab). It returns a problem's text, "" when the value is good.
func parseTemplate(s, route string) (Template, string) {
	var t Template
	if len(s) > maxHeaderValueLen {
		return t, fmt.Sprintf("value longer than %d bytes", maxHeaderValueLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return t, fmt.Sprintf("value holds the control byte %q at %d: a header value cannot hold CR, LF, NUL or other control bytes", c, i)
		}
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, templatePart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return t, fmt.Sprintf("unmatched '}' at %d (write '}}' for a literal brace)", i)
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return t, fmt.Sprintf("unclosed '{' at %d (write '{{' for a literal brace)", i)
			}
			name := s[i+1 : i+end]
			i += end
			if name == "route" {
				lit.WriteString(route)
				continue
			}
			f, ok := templateFields[name]
			if !ok {
				return t, fmt.Sprintf("unknown field {%s}: want {client}, {consumer}, {plan}, {route} or {request_id} ('{{' for a literal brace)", name)
			}
			flush()
			t.parts = append(t.parts, templatePart{field: f})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	if t.needs() == 0 {
		v := ""
		if len(t.parts) == 1 {
			v = t.parts[0].lit
		}
		t.Static = []string{v}
	}
	return t, ""
}

func (t *Template) needs() TemplateField {
	var f TemplateField
	for _, p := range t.parts {
		f |= p.field
	}
	return f
}

// buildRouteMessages compiles what a route changes in the messages it
// passes: header rules, hide_credentials, the body bound and CORS.
func buildRouteMessages(rt *Route, rc *config.RouteConfig, c *config.Config, path string, e *problems) {
	rt.CORS = buildCORS(rc.CORS, path+".cors", e)
	o := &headerOwners{}
	for _, n := range []string{c.Identity.UserHeader, c.Consumers.ForwardHeaders.Consumer, c.Consumers.ForwardHeaders.Plan} {
		if n != "" {
			o.named = append(o.named, foldName(n))
		}
	}
	rt.RequestHeaders = buildHeaderRules(rc.RequestHeaders, path+".request_headers", rt.Name, false, false, o, e)
	rt.ResponseHeaders = buildHeaderRules(rc.ResponseHeaders, path+".response_headers", rt.Name, true, rt.CORS != nil, o, e)
	if !c.Server.RequestID {
		// Without ids a client's X-Request-Id passes untouched: the
		// value would be the client's own, in a header the operator
		// means as the gateway's.
		for _, t := range []struct {
			name  string
			rules *HeaderRules
		}{{"request_headers", rt.RequestHeaders}, {"response_headers", rt.ResponseHeaders}} {
			if t.rules != nil && t.rules.Needs&FieldRequestID != 0 {
				e.add(path+"."+t.name, "names {request_id}, but server.request_id is false: it would be the client's own X-Request-Id")
			}
		}
	}
	rt.HideCredentials = rc.HideCredentials
	switch {
	case rc.MaxBodyBytes < 0:
		e.add(path+".max_body_bytes", "must not be negative (0: server.max_body_bytes), got %d", rc.MaxBodyBytes)
	case rc.MaxBodyBytes > 0:
		rt.MaxBodyBytes = rc.MaxBodyBytes
	default:
		rt.MaxBodyBytes = max(c.Server.MaxBodyBytes, 0)
	}
}

// NeedsIdentity reports whether the route's header rules name a value of
// the client's identity, which must then be resolved even when no limit
// needs it.
func (rt *Route) NeedsIdentity() bool {
	var f TemplateField
	if rt.RequestHeaders != nil {
		f |= rt.RequestHeaders.Needs
	}
	if rt.ResponseHeaders != nil {
		f |= rt.ResponseHeaders.Needs
	}
	return f.NeedsIdentity()
}
