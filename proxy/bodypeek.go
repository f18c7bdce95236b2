package proxy

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// maxPeekBody bounds the bytes of a request body the gateway reads to
// decide (limits' expressions that name body): a larger body is not
// offered to them, and is forwarded all the same.
const maxPeekBody = 64 << 10

// defaultPeekTimeout bounds the wait for a peeked body on a route without
// a timeout.
const defaultPeekTimeout = 30 * time.Second

// errNotJSON, errBodyTooLong and errNoBody say why a body is not offered.
var (
	errNotJSON     = errors.New("the request's content type is not JSON")
	errBodyTooLong = errors.New("the request body is larger than 65536 bytes")
	errNoBody      = errors.New("the request has no body")
)

// peekedBody is the start of a request body that the gateway read before
// forwarding it, and put back: reading it yields the peeked bytes, then
// the rest of the client's body; closing it closes the client's.
type peekedBody struct {
	io.Reader
	orig io.ReadCloser
}

func (p *peekedBody) Close() error { return p.orig.Close() }

// peekBody reads up to max bytes of r's body within timeout, so that
// what decides a request (an expression over its JSON body, a token
// count) can read it, and replaces r.Body with a reader that yields the
// same bytes: the upstream receives the body intact. complete is false
// when the body is longer than max (b then holds max+1 bytes, not to be
// parsed). err is a failure to read the body at all (the client went
// away, or sent nothing for timeout: os.ErrDeadlineExceeded): the request
// cannot be forwarded and must be answered (peekFailed).
//
// rw is the client's ResponseWriter, whose read deadline bounds the wait
// and is cleared afterwards. Whatever shares a request's body goes
// through here, once per request.
func peekBody(r *http.Request, rw http.ResponseWriter, max int64, timeout time.Duration) (b []byte, complete bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true, nil
	}
	if timeout <= 0 {
		timeout = defaultPeekTimeout
	}
	rc := http.NewResponseController(rw)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	size := max + 1
	if r.ContentLength >= 0 && r.ContentLength < size {
		size = r.ContentLength
	}
	buf := make([]byte, 0, min(size, 4096))
	buf, err = readUpTo(r.Body, buf, max+1)
	if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	r.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), r.Body), orig: r.Body}
	if err != nil {
		return nil, false, err
	}
	return buf, int64(len(buf)) <= max, nil
}

// readUpTo reads from rd into buf until EOF or n bytes.
func readUpTo(rd io.Reader, buf []byte, n int64) ([]byte, error) {
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):min(int64(cap(buf)), n)]
		k, err := rd.Read(room)
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// jsonContent reports whether a Content-Type names JSON:
// application/json or a +json type.
func jsonContent(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}
