package testupstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHandlerObeysHeaders(t *testing.T) {
	srv := httptest.NewServer(Handler("text/plain", []byte("hi")))
	defer srv.Close()
	get := func(h map[string]string, timeout time.Duration) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if r, err := get(nil, 5*time.Second); err != nil || r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("plain: %v %v", r, err)
	}
	if r, err := get(map[string]string{HeaderStatus: "503"}, 5*time.Second); err != nil || r.StatusCode != 503 {
		t.Errorf("status 503: %v %v", r, err)
	}
	if r, err := get(map[string]string{HeaderStatus: "soon"}, 5*time.Second); err != nil || r.StatusCode != 200 {
		t.Errorf("unparsable status: %v %v, want 200", r, err)
	}
	if _, err := get(map[string]string{HeaderReset: "1"}, 5*time.Second); err == nil {
		t.Errorf("reset: got an answer")
	}
	start := time.Now()
	if _, err := get(map[string]string{HeaderSleep: "10s"}, 100*time.Millisecond); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("sleep 10s with a 100ms client: %v after %v, want the client's timeout", err, time.Since(start))
	}
}

func TestDiscard(t *testing.T) {
	w := NewDiscard()
	w.Header().Set("A", "b")
	if n, _ := w.WriteString("abc"); n != 3 || w.Status != 200 {
		t.Errorf("WriteString: %d, status %d", n, w.Status)
	}
	w.WriteHeader(500) // too late: the first status stays
	if w.Status != 200 || w.H.Get("A") != "b" {
		t.Errorf("after a late WriteHeader: status %d, headers %v", w.Status, w.H)
	}
	w.Reset()
	w.WriteHeader(429)
	if n, _ := w.Write([]byte("xy")); n != 2 || w.Status != 429 {
		t.Errorf("after Reset: %d, status %d", n, w.Status)
	}
}
