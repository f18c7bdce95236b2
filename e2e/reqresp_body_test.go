package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMaxBodyBytes: a body past the route's max_body_bytes (or the
// server's default) is answered 413 with a problem body: by its
// Content-Length before any limit counts it or the upstream sees it, or,
// without one (chunked HTTP/1.1, HTTP/2 without content-length), while it
// streams, the upstream exchange cut. A body within the bound passes, on
// every protocol. Mutations checked: without the Content-Length check in
// serve, "declared" fails (the upstream sees the request and the limit
// counts it); without the bodyReader bound, "streamed" fails (the
// upstream receives the whole body and answers 200).
func TestMaxBodyBytes(t *testing.T) {
	t.Parallel()
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			data, ca, _, _ := frontData(t, pr, t.TempDir(), "", "", fmt.Sprintf(`
[[limits]]
name = "two"
rates = ["2/minute"]
by = ["ip"]

[[routes]]
name = "small"
path_prefix = "/small"
upstream = %q
max_body_bytes = 100
limits = ["two"]

[[routes]]
name = "default"
path_prefix = "/default"
upstream = %[1]q
`, up.URL))
			data["Front"] = data["Front"].(string) + "\nmax_body_bytes = 1000"
			f := &front{gw: startGateway(t, "front.toml.tmpl", gwOpts{Data: data}), proto: pr, ca: ca}
			c := f.client(t)
			post := func(path string, body io.Reader, length int64) *response {
				t.Helper()
				req, err := http.NewRequest("POST", f.url(path), body)
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = length
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("POST %s: %v", path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
			}
			t.Run("declared", func(t *testing.T) {
				before := up.count()
				for range 3 {
					post("/small/x", bytes.NewReader(make([]byte, 101)), 101).problem(t, 413)
				}
				post("/default/x", bytes.NewReader(make([]byte, 1001)), 1001).problem(t, 413)
				if n := up.count() - before; n != 0 {
					t.Fatalf("the upstream saw %d requests with too large a declared body", n)
				}
				// Not counted: the limit of two still admits two.
				for i := range 2 {
					if r := post("/small/x", strings.NewReader(strings.Repeat("a", 100)), 100); r.Status != 200 || r.echo(t).Body != strings.Repeat("a", 100) {
						t.Fatalf("body of exactly the bound, request %d: %s", i, r)
					}
				}
			})
			t.Run("streamed", func(t *testing.T) {
				// Unknown length: chunked on HTTP/1.1, DATA frames
				// without content-length on HTTP/2.
				body := io.MultiReader(strings.NewReader(strings.Repeat("b", 900)), strings.NewReader(strings.Repeat("c", 900)))
				r := post("/default/x", io.NopCloser(body), -1)
				if r.Status != 413 {
					t.Fatalf("streamed 1800 bytes past a 1000-byte bound: %s, want 413", r)
				}
				r.problem(t, 413)
				for _, s := range up.all() {
					if len(s.Body) > 1000 {
						t.Fatalf("the upstream received %d body bytes past the bound", len(s.Body))
					}
				}
				if r := post("/default/x", io.NopCloser(strings.NewReader(strings.Repeat("d", 1000))), -1); r.Status != 200 || len(r.echo(t).Body) != 1000 {
					t.Fatalf("streamed body of exactly the bound: %s", r)
				}
			})
		})
	}
}

// TestMaxBodyBytesSlowStream: a body trickled past the bound is cut as
// soon as it passes it; the client gets 413 without sending the rest.
// Mutation checked: without the bound the exchange waits for the whole
// body (the test's hang guard fails it).
func TestMaxBodyBytesSlowStream(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := startMessages(t, "", fmt.Sprintf(`
[[routes]]
name = "small"
path_prefix = "/"
upstream = %q
max_body_bytes = 10
`, up.URL))
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		// 20 bytes, then nothing until the test ends.
		_, _ = pw.Write([]byte(strings.Repeat("x", 20)))
	}()
	req, _ := http.NewRequest("POST", f.url("/x"), pr)
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := newClient(t, "").Do(req)
		if err != nil {
			t.Errorf("POST: %v", err)
			done <- nil
			return
		}
		done <- resp
	}()
	select {
	case resp := <-done:
		if resp == nil {
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Fatalf("body past the bound, still open: %d, want 413", resp.StatusCode)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer within 15s to a body past its bound that never ends")
	}
}
