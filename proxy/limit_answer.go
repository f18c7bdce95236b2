package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// jitter adds each denying limit's retry_after_jitter share to its
// decision's wait, before the headers and the answer are written from it,
// so Retry-After and RateLimit's t agree. Only a denied request pays the
// limit lookups.
func jitter(p *policy.Policy, hits []ratelimit.Hit, ds []ratelimit.Decision, now time.Time) {
	for i := range min(len(hits), len(ds)) {
		d, lim := &ds[i], hits[i].Limit
		if d.Allowed || d.Never || lim.Shadow {
			continue
		}
		l := p.Limit(lim.Name)
		if l == nil || l.Jitter <= 0 {
			continue
		}
		var w time.Duration
		if d.Window >= 0 && d.Window < len(lim.Rates) {
			w = lim.Rates[d.Window].Window
		}
		j := l.JitterFor(hits[i].Key, now, w)
		d.RetryAfter += j
		d.Reset += j
	}
}

// tagShadowed adds the tag header of every tag limit the allowed request
// r is over, so that the upstream can serve it differently. The client's
// own copies were removed in serve.
func tagShadowed(p *policy.Policy, r *http.Request, hits []ratelimit.Hit, ds []ratelimit.Decision) {
	for i := range min(len(hits), len(ds)) {
		if !hits[i].Limit.Shadow || ds[i].Allowed {
			continue
		}
		if l := p.Limit(hits[i].Limit.Name); l != nil && l.Tag != nil {
			r.Header[l.Tag.Header] = append(r.Header[l.Tag.Header], l.Tag.Value)
		}
	}
}

// dropClientTag deletes a client's copies of the tag header name from h:
// the canonical spelling, and any spelled with '_' (X_Ratelimit_Exceeded),
// which CGI, WSGI, PHP and Rack read as the same header, after the
// gateway's (Go writes names in order, '_' after '-'), so it could clear
// or forge the tag.
func dropClientTag(h http.Header, name string) {
	delete(h, name)
	for k := range h {
		if strings.IndexByte(k, '_') >= 0 && dashedEqual(k, name) {
			delete(h, k)
		}
	}
}

// tagNames are the tag headers of rt's tag limits, nil for none.
func tagNames(rt *policy.Route) []string {
	var names []string
	for _, l := range rt.Limits {
		if l.Tag != nil && !slices.Contains(names, l.Tag.Header) {
			names = append(names, l.Tag.Header)
		}
	}
	return names
}

// keepTags copies the gateway's tags (tagShadowed, on in) to the upstream
// request out once ReverseProxy has dropped the headers that the
// client's Connection header names: a client naming the tag header there
// would otherwise have the tag removed on its way up, and pass a soft
// limit untagged.
func keepTags(names []string, in, out http.Header) {
	for _, n := range names {
		if v := in[n]; len(v) > 0 {
			out[n] = v
		}
	}
}

// limitAnswer writes the denying limit's own answer (response), when it
// has one, and reports whether it did. The rate-limit headers already set
// are kept, and Retry-After is set as for the 429.
func (h *Handler) limitAnswer(q *request) bool {
	i := headers.Pick(q.hits, q.ds)
	if i < 0 {
		return false
	}
	l := q.snap.p.Limit(q.hits[i].Limit.Name)
	if l == nil || l.Answer == nil {
		return false
	}
	a, d := l.Answer, &q.ds[i]
	var retry int64
	if !d.Never {
		retry = headers.RetryAfterSeconds(d.RetryAfter)
	}
	hd := q.w.Header()
	for k, v := range a.Headers {
		hd[k] = v
	}
	if retry > 0 {
		hd["Retry-After"] = h.answers.IntValue(retry)
	}
	body := a.AppendBody(make([]byte, 0, 256), l.Name, retry)
	hd["Content-Type"] = a.ContentType
	hd["Content-Length"] = []string{strconv.Itoa(len(body))}
	q.w.WriteHeader(a.Status)
	_, _ = q.w.Write(body)
	return true
}
