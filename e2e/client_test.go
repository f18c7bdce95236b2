package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newClient returns an HTTP client whose connections come from the
// loopback address srcIP ("" for the default, 127.0.0.1). Linux routes all
// of 127.0.0.0/8 to the loopback interface, so 127.0.0.2 is a second,
// distinct client address.
func newClient(t testing.TB, srcIP string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if srcIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(srcIP)}
	}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport: tr,
		Timeout:   20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// response is a fully read HTTP response.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends one request and reads the whole response; hdr values are set
// on the request ("Host" sets the Host).
func do(t testing.TB, c *http.Client, method, url string, hdr map[string]string) *response {
	t.Helper()
	r, err := tryDo(c, method, url, hdr, nil)
	if err != nil {
		if strings.Contains(err.Error(), "cannot assign requested address") {
			t.Fatalf("%s %s: %v (these tests need the whole of 127.0.0.0/8 on loopback, as Linux has)", method, url, err)
		}
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// tryDo is do without failing the test.
func tryDo(c *http.Client, method, url string, hdr map[string]string, body []byte) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// get is do with GET.
func get(t testing.TB, c *http.Client, url string, hdr map[string]string) *response {
	t.Helper()
	return do(t, c, http.MethodGet, url, hdr)
}

func (r *response) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(r.Status))
	for k, vs := range r.Header {
		for _, v := range vs {
			b.WriteString("\n  " + k + ": " + v)
		}
	}
	body := string(r.Body)
	if len(body) > 600 {
		body = body[:600] + "…"
	}
	b.WriteString("\n  body: " + body)
	return b.String()
}

// echo decodes the test upstream's echo of the request.
func (r *response) echo(t testing.TB) *seen {
	t.Helper()
	if r.Header.Get("X-Upstream") != "echo" {
		t.Fatalf("response did not come from the upstream: %s", r)
	}
	var s seen
	if err := json.Unmarshal(r.Body, &s); err != nil {
		t.Fatalf("upstream echo: %v: %s", err, r.Body)
	}
	return &s
}

// problem is an RFC 9457 body as the README ("Responses") shapes it.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	RetryAfter       *int64   `json:"retry_after"`
}

// problem checks that r is an application/problem+json response with the
// given status (also in the body) and returns the body.
func (r *response) problem(t testing.TB, status int) *problem {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("Content-Type %q, want application/problem+json: %s", ct, r)
	}
	var p problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body is not JSON: %v: %s", err, r.Body)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d: %s", p.Status, status, r.Body)
	}
	if p.Title == "" || p.Type == "" {
		t.Errorf("problem without type or title: %s", r.Body)
	}
	return &p
}

// retryAfter parses Retry-After as whole seconds; ok is false when absent.
func (r *response) retryAfter(t testing.TB) (secs int64, ok bool) {
	t.Helper()
	vs := r.Header.Values("Retry-After")
	if len(vs) == 0 {
		return 0, false
	}
	if len(vs) > 1 {
		t.Errorf("Retry-After sent %d times: %q", len(vs), vs)
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil {
		t.Fatalf("Retry-After %q is not an integer of seconds", vs[0])
	}
	return n, true
}

// statuses counts responses by status code.
type statuses map[int]int

func (s statuses) String() string {
	b, _ := json.Marshal(map[int]int(s))
	return string(b)
}

// exactly reports whether s holds ok 200s and limited 429s and no other
// answer.
func (s statuses) exactly(ok, limited int) bool {
	n := 0
	for _, v := range s {
		n += v
	}
	return s[200] == ok && s[429] == limited && n == ok+limited
}

// countStatuses sends n requests one after another, request i by send(i),
// and counts their statuses.
func countStatuses(n int, send func(i int) *response) statuses {
	got := statuses{}
	for i := range n {
		got[send(i).Status]++
	}
	return got
}
