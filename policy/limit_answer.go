package policy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/gateway/policy/config"
)

// Answer is a limit's own answer to a request it denies (response): its
// status, headers and body template, built once at load.
type Answer struct {
	// Status is the answer's status, 400..599.
	Status int
	// ContentType is the Content-Type header value.
	ContentType []string
	// Headers are the further headers, canonical names, set as they are.
	Headers map[string][]string
	// body is the template cut at its placeholders: literal text, then
	// alternately a placeholder and literal text.
	body []answerPart
}

// answerPart is a literal or a placeholder of a body template.
type answerPart struct {
	lit string
	ph  placeholder
}

type placeholder uint8

const (
	phNone placeholder = iota
	phLimit
	phRetryAfter
)

// maxAnswerBody bounds a response body template.
const maxAnswerBody = 64 << 10

// AppendBody appends the answer's body for limit name and a wait of
// retry seconds.
func (a *Answer) AppendBody(dst []byte, name string, retry int64) []byte {
	for _, p := range a.body {
		switch p.ph {
		case phLimit:
			dst = append(dst, name...)
		case phRetryAfter:
			dst = strconv.AppendInt(dst, retry, 10)
		default:
			dst = append(dst, p.lit...)
		}
	}
	return dst
}

// compileAnswer compiles c.Response into l.Answer.
func compileAnswer(l *Limit, c *config.LimitConfig, path string, e *problems) {
	r := c.Response
	if r == nil {
		return
	}
	path += ".response"
	a := &Answer{Status: r.Status, ContentType: []string{r.ContentType}}
	if a.Status == 0 {
		a.Status = 429
	}
	if a.Status < 400 || a.Status > 599 {
		e.add(path+".status", "must be in 400..599 (an answer that denies), got %d", r.Status)
	}
	if r.ContentType == "" {
		a.ContentType = []string{"text/plain; charset=utf-8"}
	} else if strings.ContainsAny(r.ContentType, "\r\n\x00") {
		e.add(path+".content_type", "must not hold CR, LF or NUL")
	}
	if len(r.Body) > maxAnswerBody {
		e.add(path+".body", "is %d bytes, more than %d", len(r.Body), maxAnswerBody)
	}
	a.body = parseAnswerBody(r.Body)
	var owners headerOwners
	names := make([]string, 0, len(r.Headers))
	for name := range r.Headers {
		names = append(names, name)
	}
	slices.Sort(names) // problems in a stable order
	for _, name := range names {
		v := r.Headers[name]
		p := path + ".headers." + name
		switch {
		case !validHeaderName(name):
			e.add(p, "invalid header name %q", name)
			continue
		case strings.EqualFold(name, "content-type"):
			e.add(p, "set content_type instead")
			continue
		case strings.ContainsAny(v, "\r\n\x00"):
			e.add(p, "value must not hold CR, LF or NUL")
			continue
		}
		if why := owners.ownedBy(name, true, false); why != "" {
			e.add(p, "%s: Retry-After, the rate-limit headers, framing and hop-by-hop headers are set by the gateway", why)
			continue
		}
		if a.Headers == nil {
			a.Headers = make(map[string][]string, len(r.Headers))
		}
		a.Headers[canonicalHeader(name)] = []string{v}
	}
	l.Answer = a
}

// parseAnswerBody cuts a template at {limit} and {retry_after}; other
// braces are literal.
func parseAnswerBody(s string) []answerPart {
	var out []answerPart
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			out = append(out, answerPart{lit: s})
			break
		}
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "{limit}"):
			out = append(out, answerPart{lit: s[:i]}, answerPart{ph: phLimit})
			s = rest[len("{limit}"):]
		case strings.HasPrefix(rest, "{retry_after}"):
			out = append(out, answerPart{lit: s[:i]}, answerPart{ph: phRetryAfter})
			s = rest[len("{retry_after}"):]
		default:
			out = append(out, answerPart{lit: s[:i+1]})
			s = rest[1:]
		}
	}
	return out
}
