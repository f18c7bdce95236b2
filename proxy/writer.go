package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
)

// statusWriter records the status code and body size sent.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	q      *request
	// headed is set once a final (non-1xx) header has been written.
	headed bool
	// limitHeaders are the rate-limit headers the gateway had set when
	// the upstream sent an informational answer (103 Early Hints), nil
	// before one: ReverseProxy clears the header map after relaying a
	// 1xx, and the final answer must still carry them.
	limitHeaders http.Header
}

func (w *statusWriter) WriteHeader(code int) {
	// A 101 is the last answer of its request too (the connection is a
	// tunnel after it); other 1xx come before the final one, which is
	// the status the request is logged and counted with.
	final := code >= 200 || code == http.StatusSwitchingProtocols
	if w.status == 0 && final {
		w.status = code
	}
	if final && !w.headed {
		w.head()
	}
	if !final {
		if w.limitHeaders == nil {
			w.keepLimitHeaders()
		}
		if w.q != nil {
			w.q.finishInformational(w.ResponseWriter.Header()) // request.go
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// keepLimitHeaders keeps the rate-limit headers set so far for the final
// answer (the access log and metrics see only that one).
func (w *statusWriter) keepLimitHeaders() {
	w.limitHeaders = http.Header{}
	for name, v := range w.ResponseWriter.Header() {
		if strings.HasPrefix(name, "Ratelimit") || strings.HasPrefix(name, "X-Ratelimit-") {
			w.limitHeaders[name] = v
		}
	}
}

// head completes the final header before it is written.
func (w *statusWriter) head() {
	w.headed = true
	hd := w.ResponseWriter.Header()
	for name, v := range w.limitHeaders {
		if _, ok := hd[name]; !ok {
			hd[name] = v
		}
	}
	if w.q != nil {
		w.q.finishHeader(hd)
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.headed {
		w.head()
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// WriteString writes s without converting it to a []byte when the
// underlying writer can take strings (net/http's can).
func (w *statusWriter) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.headed {
		w.head()
	}
	n, err := io.WriteString(w.ResponseWriter, s)
	w.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher for streaming responses.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection over for an upgrade the upstream accepted:
// ReverseProxy hijacks it and writes the 101 itself, never calling
// WriteHeader, so the instant the upstream's answer arrived is recorded
// here, for the adaptive limits' sample (the tunnel's life after it is no
// latency of the upstream's).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.q != nil {
		w.q.ad.header()
	}
	return conn, brw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
