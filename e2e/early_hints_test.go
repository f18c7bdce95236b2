package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEarlyHintsKeepLimitHeaders: an upstream that sends 103 Early Hints
// before its answer. The client gets the hints and then the answer with
// its rate-limit headers, and the access log records the answer's status.
// ReverseProxy clears the header map after relaying a 1xx, which took the
// RateLimit headers the gateway had set off the final answer, and the
// request was logged (and counted by status) as a 103.
func TestEarlyHintsKeepLimitHeaders(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "hello")
	}))
	t.Cleanup(up.Close)
	logPath := filepath.Join(t.TempDir(), "access.log")
	f := startMessages(t, "", fmt.Sprintf(`
[access_log]
path = %q
format = "jsonl"

[[limits]]
name = "hourly"
rates = ["10/hour"]
by = ["ip"]

[[routes]]
name = "hints"
path_prefix = "/"
upstream = %q
limits = ["hourly"]
`, logPath, up.URL))

	var hints []int
	req, err := http.NewRequest("GET", f.url("/page"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			hints = append(hints, code)
			return nil
		},
	}))
	resp, err := newClient(t, "").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(hints) != 1 || hints[0] != 103 {
		t.Fatalf("status %d after informational answers %v, want 200 after one 103", resp.StatusCode, hints)
	}
	for _, h := range []string{"Ratelimit", "Ratelimit-Policy"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("the answer after a 103 has no %s header: %v", h, resp.Header)
		}
	}
	if resp.Header.Get("Link") != "" {
		t.Errorf("the hint's Link header reached the final answer: %v", resp.Header)
	}

	var line map[string]any
	logged := func() bool {
		b, err := os.ReadFile(logPath)
		if err != nil || len(b) == 0 {
			return false
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line = nil
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["route"] == "hints" {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for !logged() {
		if time.Now().After(deadline) {
			t.Fatalf("no access log line for the route within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if line["status"] != float64(200) {
		t.Errorf("access log status %v, want 200 (the final answer): %v", line["status"], line)
	}
}
