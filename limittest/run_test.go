package limittest

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// testPolicy is one respond route under a fixed window of 2 per 10 s by
// client.
func testPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	c := config.Default()
	l := config.DefaultLimit()
	l.Name, l.Rates, l.By, l.Algorithm = "two", []string{"2/10s"}, []string{"client"}, "fixed_window"
	c.Limits = []config.LimitConfig{l}
	r := config.DefaultRoute()
	r.Name, r.PathPrefix, r.Limits = "api", "/api", []string{"two"}
	r.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
	up := config.DefaultRoute()
	up.Name, up.PathPrefix, up.Upstream = "up", "/up", "http://upstream.invalid"
	c.Routes = []config.RouteConfig{r, up}
	p, err := policy.Compile(c, os.Getenv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunDiffs: every kind of difference is reported in the words of the
// report, in file order, and a second run prints the same bytes (the
// virtual clock and fresh stores make a run deterministic).
func TestRunDiffs(t *testing.T) {
	f, err := Parse([]byte(`
[[cases]]
name = "wrong on purpose"
  [[cases.steps]]
  at = "0s"
  request = { path = "/api", count = 3 }
  expect = { status = [200, 200, 200], headers = { "RateLimit" = "nope" }, absent_headers = ["Retry-After"] }
  [[cases.steps]]
  at = "10s"
  request = { path = "/api" }
  expect = { status = 200, retry_after = 3, headers = { "X-Missing" = "1" } }

[[cases]]
name = "right"
  [[cases.steps]]
  at = "0s"
  request = { path = "/api", count = 3 }
  expect = { status = [200, 200, 429], retry_after = 10 }
`))
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t)
	var out [2]bytes.Buffer
	for i := range out {
		res, err := Run(context.Background(), p, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Write(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	want := `ok   "right"
FAIL "wrong on purpose" step 1 (at 0s, GET /api ×3):
    request 3 of 3: status: want 200, got 429 (rate limit "two" exceeded; retry in 10s)
    request 3 of 3: header RateLimit: want "nope", got "\"two\";r=0;t=10"
    request 3 of 3: header Retry-After: want none, got "10"
FAIL "wrong on purpose" step 2 (at 10s, GET /api):
    response: Retry-After: want "3", got no such header
    response: header X-Missing: want "1", got no such header
FAIL: 2 cases, 1 passed, 2 failing steps, 7 requests
`
	if out[0].String() != want {
		t.Fatalf("report:\n%s\nwant:\n%s", out[0].String(), want)
	}
	if out[1].String() != out[0].String() {
		t.Fatalf("a second run differs:\n%s", out[1].String())
	}
}

// TestUpstreamStub: an upstream route is answered in the process, with the
// step's upstream_status; nothing is dialled (the upstream's name cannot
// resolve).
func TestUpstreamStub(t *testing.T) {
	f, err := Parse([]byte(`
[[cases]]
name = "stub"
  [[cases.steps]]
  at = "0s"
  request = { path = "/up/x" }
  expect = { status = 200 }
  [[cases.steps]]
  at = "0s"
  request = { path = "/up/x", upstream_status = 503 }
  expect = { status = 503 }
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), testPolicy(t), f)
	if err != nil || !res.OK() {
		var b bytes.Buffer
		_ = res.Write(&b)
		t.Fatalf("%v\n%s", err, b.String())
	}
}
