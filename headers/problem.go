package headers

import (
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/tollgate/gateway/ratelimit"
)

// QuotaExceeded is the problem type of a rate-limit denial (the IANA HTTP
// problem type registered by the ratelimit-headers draft).
const QuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Problem is an RFC 9457 problem details object.
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
	bp := bodyPool.Get().(*[]byte)
	body := append(appendProblem((*bp)[:0], &p), '\n')
	h := w.Header()
	h["Content-Type"] = problemContentType
	h["Cache-Control"] = noStore
	h["X-Content-Type-Options"] = noSniff
	h["Content-Length"] = IntValue(int64(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
	if cap(body) <= 4096 {
		*bp = body
		bodyPool.Put(bp)
	}
}

// Header values shared by every problem response; net/http only reads them.
var (
	problemContentType = []string{"application/problem+json"}
	noStore            = []string{"no-store"}
	noSniff            = []string{"nosniff"}
)

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// intValues caches the header values of small integers (Content-Length of
// problem bodies, Retry-After): IntValue(n) is intValues[n:n+1:n+1]. The
// whole table is two heap objects, one string holding every number and
// one array of strings into it, because the garbage collector marks every
// live object on each cycle: 4,096 one-element slices and their strings
// were over half of a running gateway's live objects, and marking them
// cost every request a share of each cycle.
var intValues = func() []string {
	const n = 4096
	var digits []byte
	var ends [n]int
	for i := range n {
		digits = strconv.AppendInt(digits, int64(i), 10)
		ends[i] = len(digits)
	}
	all := string(digits)
	v := make([]string, n)
	start := 0
	for i := range v {
		v[i] = all[start:ends[i]]
		start = ends[i]
	}
	return v
}()

// IntValue returns a header value holding n. The value may be shared and
// must not be modified (its capacity is 1: an append copies).
func IntValue(n int64) []string {
	if n >= 0 && n < int64(len(intValues)) {
		return intValues[n : n+1 : n+1]
	}
	return []string{strconv.FormatInt(n, 10)}
}

// IntValue is the package's IntValue, keeping the last value built beyond
// the table: larger values (a Retry-After of an hourly limit) repeat from
// one request to the next.
func (wr *Writer) IntValue(n int64) []string {
	if n >= 0 && n < int64(len(intValues)) {
		return intValues[n : n+1 : n+1]
	}
	if last := wr.lastInt.Load(); last != nil && last.n == n {
		return last.v[:1:1]
	}
	v := &intValue{n: n, v: []string{strconv.FormatInt(n, 10)}}
	wr.lastInt.Store(v)
	return v.v[:1:1]
}

// intValue is one header value Writer.IntValue built beyond the table.
type intValue struct {
	n int64
	v []string
}

// appendProblem appends p as JSON, byte for byte what encoding/json's
// Marshal writes for it, without reflection.
func appendProblem(b []byte, p *Problem) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendString(b, p.Detail)
	}
	if len(p.ViolatedPolicies) > 0 {
		b = append(b, `,"violated-policies":[`...)
		for i, name := range p.ViolatedPolicies {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
		}
		b = append(b, ']')
	}
	if p.RetryAfter != 0 {
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendInt(b, p.RetryAfter, 10)
	}
	return append(b, '}')
}

// jsonSafe marks the ASCII bytes a JSON string holds as they are: not a
// control character, '"', '\\', nor the HTML-sensitive '<', '>' and '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// decodeRune is utf8.DecodeRuneInString or utf8.DecodeRune, as s is.
func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.DecodeRuneInString(string(s))
}

// appendString appends s as a JSON string the way encoding/json does:
// HTML-sensitive characters, control characters, U+2028 and U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD.
func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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
