// Package limittest runs limit tests: timed request scenarios on a virtual
// clock, decided by the real request handler on an in-memory store, whose
// responses are checked against expected statuses, headers and
// Retry-After — the way rule tests check alerting rules.
//
// A cases file is TOML:
//
//	[[cases]]
//	name = "five requests per 10 s per API key"
//
//	  [[cases.steps]]
//	  at = "0s"
//	  request = { method = "GET", path = "/demo", headers = { "X-API-Key" = "k1" }, count = 5 }
//	  expect = { status = [200, 200, 200, 200, 200] }
//
//	  [[cases.steps]]
//	  at = "500ms"
//	  request = { path = "/demo", headers = { "X-API-Key" = "k1" } }
//	  expect = { status = [429], retry_after = 10 }
//
// Every case starts on a fresh store at its own virtual instant, so cases
// are independent and a run is deterministic.
package limittest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/tollgate/gateway/internal/tomlbound"
)

// Bounds of a cases file, so that a mistyped count cannot make a run
// spend minutes or gigabytes.
const (
	// MaxFileBytes is the largest cases file read.
	MaxFileBytes = 4 << 20
	// MaxCount is the most requests one step sends.
	MaxCount = 100000
	// MaxRequests is the most requests a whole file sends.
	MaxRequests = 1000000
)

// defaultStart is the virtual instant a case starts at unless it names
// one: fixed, so that calendar periods fall the same way on every run.
var defaultStart = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// File is a parsed cases file.
type File struct {
	Cases []Case `toml:"cases"`
}

// Case is one scenario: steps run in order on a fresh store.
type Case struct {
	// Name names the case in reports.
	Name string `toml:"name"`
	// Start is the virtual wall-clock instant of at = "0s" (RFC 3339);
	// empty means 2026-01-01T00:00:00Z.
	Start string `toml:"start"`
	// Steps are sent in order; their at must not decrease.
	Steps []Step `toml:"steps"`

	start time.Time
}

// Step sends Request Count times at the instant At and checks Expect.
type Step struct {
	// At is the offset from the case's start (a Go duration: "0s", "1.5s").
	At      string  `toml:"at"`
	Request Request `toml:"request"`
	Expect  Expect  `toml:"expect"`

	at time.Duration
}

// Request is the request a step sends.
type Request struct {
	// Method defaults to GET.
	Method string `toml:"method"`
	// Path is the request target: path and optional query. Required.
	Path string `toml:"path"`
	// Host defaults to "gateway.test".
	Host string `toml:"host"`
	// RemoteAddr is the client's address (an IP, or IP:port); default
	// 192.0.2.1.
	RemoteAddr string `toml:"remote_addr"`
	// Headers are sent as given.
	Headers map[string]string `toml:"headers"`
	// Body is sent as the request body.
	Body string `toml:"body"`
	// Count is how many identical requests are sent at At; default 1.
	Count int `toml:"count"`
	// UpstreamStatus is what the stub upstream answers an upstream
	// route's request (default 200): a limit with count = "response"
	// counts by it.
	UpstreamStatus int `toml:"upstream_status"`
}

// Expect is what a step's responses must be.
type Expect struct {
	// StatusValue is the status as written: a list with the status of
	// every request in order, or one status (bare or in a list) every
	// request must get. Unset checks no status.
	StatusValue any `toml:"status"`
	// Status is StatusValue checked and normalised to a list.
	Status []int `toml:"-"`
	// Headers must be present with exactly these values on the step's
	// last response.
	Headers map[string]string `toml:"headers"`
	// AbsentHeaders must be missing from the step's last response.
	AbsentHeaders []string `toml:"absent_headers"`
	// RetryAfter is the Retry-After, in seconds, the step's last
	// response must carry; unset checks nothing.
	RetryAfter *int `toml:"retry_after"`
}

// Parse decodes and checks a cases file. Every problem is reported, each
// with its field path (cases[0].steps[1].request.path: ...).
func Parse(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("cases file: %d bytes, more than the %d read", len(data), MaxFileBytes)
	}
	if err := tomlbound.Check(data, tomlbound.Limits{}); err != nil {
		var pe interface{ Position() (int, int) }
		if errors.As(err, &pe) {
			row, col := pe.Position()
			return nil, fmt.Errorf("%d:%d: %s", row, col, err.Error())
		}
		return nil, err
	}
	var f File
	d := toml.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			var errs []error
			for _, e := range sm.Errors {
				row, col := e.Position()
				errs = append(errs, fmt.Errorf("%d:%d: %s: unknown field", row, col, fieldPath(e.Key())))
			}
			return nil, errors.Join(errs...)
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%d:%d: %s", row, col, de.Error())
		}
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return &f, nil
}

// fieldPath turns a TOML key path into the report's form: cases.steps.x
// stays dotted (the decoder does not say which array element it was).
func fieldPath(key []string) string { return strings.Join(key, ".") }

// check validates every case and fills the parsed fields.
func (f *File) check() error {
	var errs []error
	bad := func(path, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, a...)))
	}
	if len(f.Cases) == 0 {
		bad("cases", "none defined")
	}
	total := 0
	names := make(map[string]int)
	for i := range f.Cases {
		c := &f.Cases[i]
		cp := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			bad(cp+".name", "required")
		} else if j, dup := names[c.Name]; dup {
			bad(cp+".name", "%q already names cases[%d]", c.Name, j)
		} else {
			names[c.Name] = i
		}
		c.start = defaultStart
		if c.Start != "" {
			t, err := time.Parse(time.RFC3339, c.Start)
			if err != nil {
				bad(cp+".start", "want an RFC 3339 instant like 2026-01-01T00:00:00Z, got %q", c.Start)
			} else {
				c.start = t
			}
		}
		if len(c.Steps) == 0 {
			bad(cp+".steps", "none defined")
		}
		var prev time.Duration
		for j := range c.Steps {
			s := &c.Steps[j]
			sp := fmt.Sprintf("%s.steps[%d]", cp, j)
			if s.At == "" {
				bad(sp+".at", `required (an offset from the case's start, like "0s" or "1.5s")`)
			} else if d, err := time.ParseDuration(s.At); err != nil || d < 0 {
				bad(sp+".at", `want a duration ≥ 0 like "0s" or "1.5s", got %q`, s.At)
			} else if d < prev {
				bad(sp+".at", "%s is before the previous step's %s: time does not run back", d, prev)
			} else {
				s.at, prev = d, d
			}
			rq := &s.Request
			if rq.Method == "" {
				rq.Method = http.MethodGet
			} else if !validMethod(rq.Method) {
				bad(sp+".request.method", "%q is not an HTTP method token", rq.Method)
			}
			if rq.Path == "" {
				bad(sp+".request.path", "required")
			} else if !strings.HasPrefix(rq.Path, "/") {
				bad(sp+".request.path", "want a path starting with /, got %q", rq.Path)
			}
			if rq.Host == "" {
				rq.Host = "gateway.test"
			}
			if rq.RemoteAddr == "" {
				rq.RemoteAddr = "192.0.2.1"
			}
			if _, err := netip.ParseAddr(rq.RemoteAddr); err != nil {
				if _, err := netip.ParseAddrPort(rq.RemoteAddr); err != nil {
					bad(sp+".request.remote_addr", "want an IP or IP:port, got %q", rq.RemoteAddr)
				}
			}
			for k := range rq.Headers {
				if !validMethod(k) { // a header name is a token too
					bad(sp+".request.headers", "%q is not a header name", k)
				}
			}
			if rq.UpstreamStatus == 0 {
				rq.UpstreamStatus = http.StatusOK
			} else if rq.UpstreamStatus < 100 || rq.UpstreamStatus > 599 {
				bad(sp+".request.upstream_status", "want an HTTP status 100..599, got %d", rq.UpstreamStatus)
			}
			if rq.Count == 0 {
				rq.Count = 1
			}
			if rq.Count < 0 || rq.Count > MaxCount {
				bad(sp+".request.count", "want 1..%d, got %d", MaxCount, rq.Count)
			} else {
				total += rq.Count
			}
			ex := &s.Expect
			if err := ex.normalise(); err != nil {
				bad(sp+".expect.status", "%v", err)
			}
			if n := len(ex.Status); n > 1 && rq.Count > 0 && n != rq.Count {
				bad(sp+".expect.status", "%d statuses for %d requests: give one per request, or one for all", n, rq.Count)
			}
			for k, st := range ex.Status {
				if st < 100 || st > 599 {
					bad(fmt.Sprintf("%s.expect.status[%d]", sp, k), "want an HTTP status 100..599, got %d", st)
				}
			}
			if ex.RetryAfter != nil && *ex.RetryAfter < 0 {
				bad(sp+".expect.retry_after", "want seconds ≥ 0, got %d", *ex.RetryAfter)
			}
			for k := range ex.Headers {
				if !validMethod(k) {
					bad(sp+".expect.headers", "%q is not a header name", k)
				}
			}
			if len(ex.Status) == 0 && len(ex.Headers) == 0 && len(ex.AbsentHeaders) == 0 && ex.RetryAfter == nil {
				bad(sp+".expect", "checks nothing: give status, headers, absent_headers or retry_after")
			}
		}
	}
	if total > MaxRequests {
		bad("cases", "%d requests in all, more than %d", total, MaxRequests)
	}
	return errors.Join(errs...)
}

// validMethod reports whether s is an RFC 9110 token.
func validMethod(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// describe is a step's request in one line: GET /demo ×5.
func (r *Request) describe() string {
	s := r.Method + " " + r.Path
	if r.Count > 1 {
		s += " ×" + strconv.Itoa(r.Count)
	}
	return s
}

// Load reads and parses the cases file at path; problems name the file.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// normalise fills Status from StatusValue.
func (e *Expect) normalise() error {
	switch v := e.StatusValue.(type) {
	case nil:
		return nil
	case int64:
		e.Status = []int{int(v)}
		return nil
	case []any:
		for i, x := range v {
			n, ok := x.(int64)
			if !ok {
				return fmt.Errorf("element %d: want an integer status, got %v", i, x)
			}
			e.Status = append(e.Status, int(n))
		}
		if len(e.Status) == 0 {
			return errors.New("empty list: give one status per request, or one for all")
		}
		return nil
	default:
		return fmt.Errorf("want a status or a list of statuses, got %v", v)
	}
}
