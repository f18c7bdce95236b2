package headers

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tollgate/gateway/ratelimit"
)

// QuotaExceeded is the problem type of a rate-limit denial (the IANA HTTP
// problem type registered by the ratelimit-headers draft).
const QuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Problem is an RFC 9457 problem details object, shaped as in SPEC §4.
type Problem struct {
	// Type is a URI naming the problem type; "" is written as "about:blank".
	Type string `json:"type"`
	// Title is the short, human-readable summary, e.g. "Too Many Requests";
	// "" is written as the status text.
	Title string `json:"title"`
	// Status is the HTTP status code, also written as the response status.
	Status int `json:"status"`
	// Detail explains this occurrence; omitted when empty.
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies names the limits that denied the request; omitted
	// when empty.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// RetryAfter is the wait in whole seconds (equal to Retry-After);
	// omitted when 0, i.e. when no wait would help.
	RetryAfter int64 `json:"retry_after,omitempty"`
}

// WriteProblem writes p as the whole response: status p.Status,
// Content-Type application/problem+json, Cache-Control no-store, and the
// JSON body. Headers already set on w (rate-limit headers, Retry-After) are
// kept.
func WriteProblem(w http.ResponseWriter, p Problem) {
	if p.Status == 0 {
		p.Status = http.StatusInternalServerError
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: every field is a plain string or number
		body = []byte(`{"type":"about:blank","status":500}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// TooManyRequests builds the 429 body for a denied request from its hits and
// decisions. ViolatedPolicies lists every enforced limit that denied, in hit
// order, without repeats. When a hit's cost exceeds its limit's capacity
// (Decision.Never) the detail says so and RetryAfter is 0, since no wait
// helps; otherwise RetryAfter is RetryAfterSeconds of the longest wait and
// the detail names the limit that imposes it.
func TooManyRequests(hits []ratelimit.Hit, ds []ratelimit.Decision) Problem {
	p := Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: http.StatusTooManyRequests}
	n := min(len(hits), len(ds))
	for i := 0; i < n; i++ {
		l := hits[i].Limit
		if l == nil || l.Shadow || ds[i].Allowed {
			continue
		}
		dup := false
		for _, name := range p.ViolatedPolicies {
			dup = dup || name == l.Name
		}
		if !dup {
			p.ViolatedPolicies = append(p.ViolatedPolicies, l.Name)
		}
	}
	i := Pick(hits, ds)
	if i < 0 || ds[i].Allowed {
		p.Detail = "rate limit exceeded"
		p.RetryAfter = 1
		return p
	}
	d, l := &ds[i], hits[i].Limit
	if d.Never {
		capacity := d.Limit
		if capacity == 0 {
			capacity = l.Capacity(d.Window)
		}
		p.Detail = "cost " + strconv.FormatInt(hits[i].Cost, 10) + " exceeds capacity " +
			strconv.FormatInt(capacity, 10) + " of limit " + strconv.Quote(l.Name)
		return p
	}
	p.RetryAfter = RetryAfterSeconds(d.RetryAfter)
	kind := "rate limit "
	if l.Algorithm == ratelimit.Concurrency {
		kind = "concurrency limit "
	}
	p.Detail = kind + strconv.Quote(l.Name) + " exceeded; retry in " + strconv.FormatInt(p.RetryAfter, 10) + "s"
	return p
}
