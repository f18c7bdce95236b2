package replay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
)

// loggedUnits carries a line's units (accesslog.Entry.Units) to the
// upstream stand-in, so that a token budget counts the usage the
// upstream reported then.
type loggedUnits struct{}

// usageSource is where one token budget of the replayed configuration
// reads its usage: a dotted path in the answer's JSON body, or a header.
type usageSource struct {
	limit  string
	keys   []string
	header string
}

// standIn is the upstream of a replay: it answers every request with
// the status its line logged (loggedStatus), 200 without one, and, for a
// line with units, an answer carrying them where each token budget of
// the replayed configuration reads its usage: the units its line logged
// for a limit of the same name, else the largest it logged for any limit
// (the answer's usage, as the logged configuration counted it). A line
// without units answers an empty body (no usage: on_missing_usage
// decides).
type standIn struct {
	usage []usageSource
}

func newStandIn(p *policy.Policy) standIn {
	var s standIn
	seen := map[*policy.Limit]bool{}
	for _, rt := range p.Routes {
		for _, l := range rt.Limits {
			if seen[l] || l.Response == nil || l.Response.Usage == nil {
				continue
			}
			seen[l] = true
			u := usageSource{limit: l.Name, header: l.Response.CostHeader}
			if u.header == "" {
				u.keys = strings.Split(l.Response.Usage.Body.String(), ".")
			}
			s.usage = append(s.usage, u)
		}
	}
	return s
}

// RoundTrip implements http.RoundTripper.
func (s standIn) RoundTrip(r *http.Request) (*http.Response, error) {
	code := http.StatusOK
	if c, ok := r.Context().Value(loggedStatus{}).(int); ok {
		code = c
	}
	resp := &http.Response{
		Status: http.StatusText(code), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: r, ContentLength: 0,
	}
	units, _ := r.Context().Value(loggedUnits{}).([]accesslog.Units)
	if len(units) == 0 || len(s.usage) == 0 {
		return resp, nil
	}
	var most int64
	for _, u := range units {
		most = max(most, u.N)
	}
	doc := map[string]any{}
	for _, src := range s.usage {
		n := most
		for _, u := range units {
			if u.Limit == src.limit {
				n = u.N
			}
		}
		if src.header != "" {
			if n > 0 {
				resp.Header.Set(src.header, strconv.FormatInt(n, 10))
			}
			continue
		}
		m := doc
		for _, k := range src.keys[:len(src.keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[src.keys[len(src.keys)-1]] = n
	}
	if len(doc) > 0 {
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		resp.Header.Set("Content-Type", "application/json")
		resp.Body, resp.ContentLength = readCloser{strings.NewReader(string(b))}, int64(len(b))
	}
	return resp, nil
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
