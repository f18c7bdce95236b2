package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestTopNamesConsumers: /admin/top shows a registered consumer by its
// name, as the access log's consumer field does (the name is the
// operator's, no secret), never by a hash; its API key stays hidden in
// both.
func TestTopNamesConsumers(t *testing.T) {
	t.Parallel()
	g, _, _ := consumersGateway(t, "", "reject")
	c := &http.Client{Timeout: 10 * time.Second}
	// acme's plan allows 7 a minute: 3 of 10 denied.
	got := tally(t, c, g, 10, func(int) string { return "acme-key-1" })
	wantTally(t, "acme", got, 7, 3)
	r := adminDo(t, g, "GET", "/admin/top?limit=per-consumer", "")
	if r.Status != 200 {
		t.Fatalf("GET /admin/top: %s", r)
	}
	var top topBody
	if err := json.Unmarshal(r.Body, &top); err != nil {
		t.Fatal(err)
	}
	if cl := top.Denied.Clients; len(cl) != 1 || cl[0].Client != "acme" || cl[0].Kind != "consumer" || cl[0].Count != 3 {
		t.Errorf("top denied clients %+v, want acme (consumer) with 3", cl)
	}
	if strings.Contains(string(r.Body), "acme-key-1") {
		t.Errorf("/admin/top shows the API key: %s", r.Body)
	}
	// The access log names acme the same way.
	logPath := g.data["AccessLog"].(string)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), `"consumer":"acme"`) {
			if strings.Contains(string(b), "acme-key-1") {
				t.Errorf("the access log shows the API key")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the access log %s never named consumer acme:\n%s", logPath, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
