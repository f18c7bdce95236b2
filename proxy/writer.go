package proxy

import (
	"io"
	"net/http"
)

// statusWriter records the status code and body size sent.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	q      *request
	// headed is set once a final (non-1xx) header has been written.
	headed bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	// A 101 is the last answer of its request too (the connection is a
	// tunnel after it); other 1xx come before the final one.
	if (code >= 200 || code == http.StatusSwitchingProtocols) && !w.headed {
		w.head()
	}
	w.ResponseWriter.WriteHeader(code)
}

// head completes the final header before it is written.
func (w *statusWriter) head() {
	w.headed = true
	if w.q != nil {
		w.q.finishHeader(w.ResponseWriter.Header())
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

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
