package proxy

import (
	"io"
	"net/http"
	"net/http/httputil"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
)

// messages is what a route changes in the messages it passes, built with
// its ReverseProxy: the request id, hidden credentials and header rules
// on the way up, header rules on the way back.
type messages struct {
	// requestID copies the request's X-Request-Id to the upstream
	// request (after ReverseProxy dropped what the client's Connection
	// header named, which could name it).
	requestID bool
	// req and resp are the route's header rules (nil: none).
	req, resp *policy.HeaderRules
	// respelled are the names request rules set or remove, and with
	// hide_credentials the API key and token headers: a client's copy
	// spelled with '_' (X_Gateway, X_Api_Key) goes too, since CGI, WSGI,
	// PHP and Rack read it as the same header and could take it for the
	// gateway's or a credential.
	respelled []string
	// underscored is set when a name in respelled holds '_' (a rule may
	// be written X_Caller): then a client's X-Caller, the same header to
	// those frameworks and the only one to a server that drops names with
	// '_' (nginx, Apache), goes too, so every name is looked at.
	underscored bool
	// hide holds the credentials hide_credentials removes; nil when off.
	hide *keys.Extractor
	// label turns a client identity into what the access log shows.
	label func(kind, value string) string
	// record is the response counting's ModifyResponse, nil when the
	// route counts no limit by response.
	record func(*http.Response) error
}

// newMessages returns the messages of route rt under p, nil when it
// changes nothing.
func (h *Handler) newMessages(rt *policy.Route, p *policy.Policy) *messages {
	m := &messages{requestID: p.Server.RequestID, req: rt.RequestHeaders, resp: rt.ResponseHeaders, label: h.clientLabel}
	if rt.HideCredentials {
		m.hide = p.Identity
	}
	if countsResponse(rt) {
		m.record = h.recordResponse
	}
	if m.hide != nil {
		// A client's X_Api_Key is the key to a CGI-style upstream.
		m.respelled = append(m.respelled, m.hide.APIKeyHeader())
		if th := m.hide.TokenHeader(); th != "" {
			m.respelled = append(m.respelled, th)
		}
	}
	if r := rt.RequestHeaders; r != nil {
		m.respelled = append(m.respelled, r.Remove...)
		for _, s := range r.Set {
			m.respelled = append(m.respelled, s.Name)
		}
	}
	for _, n := range m.respelled {
		m.underscored = m.underscored || strings.IndexByte(n, '_') >= 0
	}
	if !m.requestID && m.req == nil && m.resp == nil && m.hide == nil {
		return nil
	}
	return m
}

// rewrite changes the upstream request pr.Out; the route's Rewrite calls
// it once the gateway's own headers are stripped and set.
func (m *messages) rewrite(pr *httputil.ProxyRequest) {
	if m == nil {
		return
	}
	out := pr.Out.Header
	if m.requestID {
		if v := pr.In.Header[requestIDHeader]; v != nil {
			out[requestIDHeader] = v
		}
	}
	if e := m.hide; e != nil {
		delete(out, e.APIKeyHeader())
		if q := e.APIKeyQuery(); q != "" && pr.Out.URL.RawQuery != "" {
			pr.Out.URL.RawQuery = keys.WithoutQueryParam(pr.Out.URL.RawQuery, q)
		}
		e.DropTokens(out)
	}
	if len(m.respelled) > 0 {
		for name := range out {
			if (m.underscored || strings.IndexByte(name, '_') >= 0) && dashedAny(name, m.respelled) {
				delete(out, name)
			}
		}
	}
	if m.req != nil {
		var v policy.TemplateValues
		m.values(&v, m.req.Needs, pr.In, pr.In.Header)
		applyHeaderRules(out, m.req, &v)
	}
}

// modifyResponse is the route's ModifyResponse: it runs on the
// upstream's answers only, never on the gateway's own (a 429, a 502).
func (m *messages) modifyResponse(res *http.Response) error {
	if m.record != nil {
		if err := m.record(res); err != nil {
			return err
		}
	}
	if m.resp != nil {
		var v policy.TemplateValues
		m.values(&v, m.resp.Needs, res.Request, res.Request.Header)
		applyHeaderRules(res.Header, m.resp, &v)
		if res.StatusCode != http.StatusSwitchingProtocols && res.Body != nil && res.Body != http.NoBody {
			// The upstream's trailers, announced or not, arrive in
			// res.Trailer when its body ends and are relayed after it:
			// the names the rules govern go there too. (A 101's body is
			// the tunnel, which ReverseProxy needs unwrapped.)
			dropGoverned(res.Trailer, m.resp)
			res.Body = &trailerFilter{ReadCloser: res.Body, res: res, rules: m.resp}
		}
	}
	return nil
}

// trailerFilter removes from its response's trailers, once the body has
// ended (when the transport has filled them in), the headers the route's
// response rules govern.
type trailerFilter struct {
	io.ReadCloser
	res   *http.Response
	rules *policy.HeaderRules
}

func (f *trailerFilter) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err == io.EOF {
		dropGoverned(f.res.Trailer, f.rules)
	}
	return n, err
}

// dropGoverned deletes from h every name rules remove, set or add.
func dropGoverned(h http.Header, rules *policy.HeaderRules) {
	if len(h) == 0 {
		return
	}
	for _, n := range rules.Remove {
		delete(h, n)
	}
	for i := range rules.Set {
		delete(h, rules.Set[i].Name)
	}
	for i := range rules.Add {
		delete(h, rules.Add[i].Name)
	}
}

// modifyResponse returns the ModifyResponse of a route whose messages are
// m (nil when it needs none).
func (h *Handler) modifyResponse(rt *policy.Route, m *messages) func(*http.Response) error {
	switch {
	case m != nil && m.resp != nil:
		return m.modifyResponse
	case countsResponse(rt):
		return h.recordResponse
	}
	return nil
}

// values fills the template values that needs names: the request id
// from hdr, the identity from r's context (proceed puts it there when
// the route's rules name it).
func (m *messages) values(v *policy.TemplateValues, needs policy.TemplateField, r *http.Request, hdr http.Header) {
	if needs&policy.FieldRequestID != 0 {
		v.RequestID = firstValue(hdr, requestIDHeader)
	}
	if !needs.NeedsIdentity() || r == nil {
		return
	}
	id, _ := r.Context().Value(identityKey{}).(*keys.Identity)
	if id == nil {
		return
	}
	if id.Client != "" && m.label != nil {
		v.Client = m.label(id.ClientKind.String(), id.Client)
	}
	v.Consumer, v.Plan = id.ConsumerName(), id.Plan
}

// applyHeaderRules applies rules to h: remove, then set, then add. The
// names are canonical and none is a header the gateway owns (refused when
// the configuration was compiled).
func applyHeaderRules(h http.Header, rules *policy.HeaderRules, v *policy.TemplateValues) {
	for _, n := range rules.Remove {
		delete(h, n)
	}
	for i := range rules.Set {
		r := &rules.Set[i]
		if r.Value.Static != nil {
			// Shared read-only; capacity 1, so an append copies it.
			h[r.Name] = r.Value.Static
			continue
		}
		h[r.Name] = []string{r.Value.Expand(v)}
	}
	for i := range rules.Add {
		r := &rules.Add[i]
		h[r.Name] = append(h[r.Name], r.Value.Expand(v))
	}
}
