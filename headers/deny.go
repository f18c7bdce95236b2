package headers

import (
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/tollgate/gateway/ratelimit"
)

// tooManyPrefix is the start of every denial's problem body: its type,
// title and status, escaped once (the object without its closing brace).
var tooManyPrefix = func() string {
	b := appendProblem(nil, &Problem{Type: QuotaExceeded, Title: "Too Many Requests", Status: http.StatusTooManyRequests})
	return string(b[:len(b)-1])
}()

// WriteTooManyRequests writes the whole 429 answer of a denial among
// hits/ds: the Retry-After header (when a wait helps) and the problem body
// of TooManyRequests, byte for byte what
//
//	p := TooManyRequests(hits, ds)
//	if p.RetryAfter > 0 {
//		w.Header()["Retry-After"] = IntValue(p.RetryAfter)
//	}
//	WriteProblem(w, p)
//
// writes, without building the problem's strings: the usual denial (a
// limit that a wait will admit) allocates nothing here. Rate-limit headers
// already set on w are kept.
func (wr *Writer) WriteTooManyRequests(w http.ResponseWriter, hits []ratelimit.Hit, ds []ratelimit.Decision) {
	i := Pick(hits, ds)
	if i < 0 || ds[i].Allowed || ds[i].Never {
		p := TooManyRequests(hits, ds)
		if p.RetryAfter > 0 {
			w.Header()["Retry-After"] = wr.IntValue(p.RetryAfter)
		}
		WriteProblem(w, p)
		return
	}
	d, l := &ds[i], hits[i].Limit
	retry := RetryAfterSeconds(d.RetryAfter)
	n := min(len(hits), len(ds))
	if n == 1 {
		// One limit: the body depends on the limit and the wait alone,
		// and a denied client that keeps asking gets the same one until
		// the wait moves by a second.
		if c := wr.lastTooMany.Load(); c != nil && c.l == l && c.retry == retry {
			wr.writeTooMany(w, retry, c.length, c.body)
			return
		}
	}

	bp := bodyPool.Get().(*[]byte)
	b := append((*bp)[:0], tooManyPrefix...)
	// The detail, as TooManyRequests words it, built on the stack and
	// escaped into the body.
	kind := `,"detail":"rate limit `
	if l.Algorithm == ratelimit.Concurrency {
		kind = `,"detail":"concurrency limit `
	}
	if plain(l.Name) {
		// strconv.Quote adds only the quotes, which JSON escapes.
		b = append(append(append(b, kind...), `\"`...), l.Name...)
		b = append(b, `\" exceeded; retry in `...)
		b = append(strconv.AppendInt(b, retry, 10), 's', '"')
	} else {
		var scratch [128]byte
		detail := append(scratch[:0], kind[len(`,"detail":"`):]...)
		detail = strconv.AppendQuote(detail, l.Name)
		detail = append(detail, " exceeded; retry in "...)
		detail = append(strconv.AppendInt(detail, retry, 10), 's')
		b = appendString(append(b, `,"detail":`...), detail)
	}
	// The violated policies: every enforced denying limit, once each, in
	// hit order.
	b = append(b, `,"violated-policies":[`...)
	first := true
	for j := 0; j < n; j++ {
		lj := hits[j].Limit
		if lj == nil || lj.Shadow || ds[j].Allowed || seenBefore(hits, ds, j) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		if plain(lj.Name) {
			b = append(append(append(b, '"'), lj.Name...), '"')
		} else {
			b = appendString(b, lj.Name)
		}
	}
	b = append(b, `],"retry_after":`...)
	b = append(strconv.AppendInt(b, retry, 10), '}', '\n')

	length := wr.IntValue(int64(len(b)))
	if n == 1 {
		wr.lastTooMany.Store(&tooManyBody{l: l, retry: retry, body: slices.Clone(b), length: length})
	}
	wr.writeTooMany(w, retry, length, b)
	if cap(b) <= 4096 {
		*bp = b
		bodyPool.Put(bp)
	}
}

// writeTooMany writes a 429 of body, whose Content-Length value is length.
func (wr *Writer) writeTooMany(w http.ResponseWriter, retry int64, length []string, body []byte) {
	h := w.Header()
	h["Retry-After"] = wr.IntValue(retry)
	h["Content-Type"] = problemContentType
	h["Cache-Control"] = noStore
	h["X-Content-Type-Options"] = noSniff
	h["Content-Length"] = length
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// tooManyBody is the problem body of a denial by one limit, l, whose wait
// is retry seconds, with its Content-Length value. Read-only once stored.
type tooManyBody struct {
	l      *ratelimit.Limit
	retry  int64
	body   []byte
	length []string
}

// seenBefore reports whether an enforced denying hit before j has the
// same limit name as hit j (TooManyRequests names each limit once).
func seenBefore(hits []ratelimit.Hit, ds []ratelimit.Decision, j int) bool {
	for k := 0; k < j; k++ {
		lk := hits[k].Limit
		if lk != nil && !lk.Shadow && !ds[k].Allowed && lk.Name == hits[j].Limit.Name {
			return true
		}
	}
	return false
}

// plain reports whether name is printable ASCII that neither Go quoting
// nor JSON escapes (no '"', '\\', '<', '>' or '&'): the usual limit name,
// written as it is.
func plain(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= utf8.RuneSelf || !jsonSafe[c] || c == 0x7f {
			return false
		}
	}
	return true
}
