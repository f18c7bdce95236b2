package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDistinctExpr: a distinct limit whose value is an expression reading
// the JSON body counts credential stuffing (distinct usernames per IP) on
// the memory store and Redis: a fourth username in the window is denied,
// a username already tried passes, and a body that is not JSON follows
// on_error — "shared" counts every such body of a key as one value,
// "skip" lets it through uncounted, "deny" answers it 400 naming the
// field.
func TestDistinctExpr(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "stuffing"
algorithm = "distinct"
distinct = 'body.username'
by = ["ip"]
rates = ["3/10m"]
when = 'request.path == "/login"'

[[limits]]
name = "stuffing-skip"
algorithm = "distinct"
distinct = 'body.username'
by = ["ip"]
rates = ["3/10m"]
when = 'request.path == "/login-skip"'
on_error = "skip"

[[limits]]
name = "stuffing-deny"
algorithm = "distinct"
distinct = 'body.username'
by = ["ip"]
rates = ["3/10m"]
when = 'request.path == "/login-deny"'
on_error = "deny"
`
		avoidWindowEdge(10 * time.Minute)
		g := startExprGateway(t, backend, body, `"stuffing", "stuffing-skip", "stuffing-deny"`, "30s")
		c := newClient(t, "")
		js := map[string]string{"Content-Type": "application/json"}
		login := func(path, user string) *response {
			return send(t, c, "POST", g.url(path), js, `{"username":"`+user+`","password":"hunter2"}`)
		}
		text := func(path, b string) *response {
			return send(t, c, "POST", g.url(path), map[string]string{"Content-Type": "text/plain"}, b)
		}

		// on_error = "skip": three usernames, the fourth denied, a tried
		// one served; a body that is not JSON is not counted.
		got := statusList(login("/login-skip", "alice"), login("/login-skip", "bob"), login("/login-skip", "carol"),
			login("/login-skip", "dave"), login("/login-skip", "alice"), text("/login-skip", "username=eve"),
			send(t, c, "POST", g.url("/login-skip"), js, `{"username":`))
		if got != "200,200,200,429,200,200,200" {
			t.Fatalf("skip: %s, want 200,200,200,429,200,200,200", got)
		}

		// on_error = "shared": the bodies that are not JSON count as one
		// value together, so the third username is one too many.
		got = statusList(login("/login", "alice"), text("/login", "username=eve"), text("/login", "username=mallory"),
			send(t, c, "POST", g.url("/login"), js, `{"user":"trudy"}`), login("/login", "bob"),
			login("/login", "carol"), login("/login", "alice"), text("/login", "x"))
		if got != "200,200,200,200,200,429,200,200" {
			t.Fatalf("shared: %s, want 200,200,200,200,200,429,200,200", got)
		}

		// on_error = "deny": 400 naming the field, counted nowhere.
		r := text("/login-deny", "username=eve")
		if r.Status != 400 || !strings.Contains(string(r.Body), "distinct") {
			t.Fatalf("deny, a body that is not JSON: %s, want 400 naming distinct", r)
		}
		got = statusList(login("/login-deny", "alice"), login("/login-deny", "bob"), login("/login-deny", "carol"),
			login("/login-deny", "dave"), login("/login-deny", "bob"))
		if got != "200,200,200,429,200" {
			t.Fatalf("deny: %s, want 200,200,200,429,200", got)
		}
	})
}

// TestDistinctExprValidate: validate accepts an expression distinct and
// prints its memory bound as for a key part, and names the field path,
// the key parts and CEL's error for a value that is neither.
func TestDistinctExprValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, distinct string) string {
		p := dir + "/" + name
		cfg := "[server]\nlisten = \"127.0.0.1:0\"\n\n[[limits]]\nname = \"stuffing\"\nalgorithm = \"distinct\"\ndistinct = '" + distinct + "'\nby = [\"ip\"]\nrates = [\"5/10m\"]\n\n" +
			"[[routes]]\nname = \"login\"\npath_prefix = \"/login\"\nrespond = { status = 200, body = \"ok\" }\nlimits = [\"stuffing\"]\n"
		writeFileAtomic(t, p, []byte(cfg))
		return p
	}
	code, stdout, stderr := runGateway(t, nil, "validate", "--config", write("ok.toml", "body.username"))
	if code != 0 || !strings.Contains(stdout, `limit "stuffing" distinct: up to`) {
		t.Fatalf("validate: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, stderr = runGateway(t, nil, "validate", "--config", write("bad.toml", "body.usrname +"))
	out := stdout + stderr
	if code == 0 || !strings.Contains(out, "limits[0].distinct") || !strings.Contains(out, "not a key part") || !strings.Contains(out, "Syntax error") {
		t.Fatalf("validate of a bad expression: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestDistinctExprCandidate: a candidate configuration whose distinct
// limit is an expression (usernames from a header, 3 an hour per client)
// evaluates it on the live traffic as the live path would: a client
// trying 5 usernames and one again is allowed live, and the candidate
// reports exactly 2 extra denials (the 4th and 5th usernames).
func TestDistinctExprCandidate(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		const token = "cand-secret"
		next := filepath.Join(t.TempDir(), "next.toml")
		cand := `[[limits]]
name = "users-per-key"
algorithm = "distinct"
distinct = 'request.headers["x-user"]'
by = ["client"]
rates = ["3/1h"]

[[routes]]
name = "api"
path_prefix = "/api"
respond = { status = 200, body = "ok" }
limits = ["users-per-key"]
`
		if err := os.WriteFile(next, []byte(cand), 0o600); err != nil {
			t.Fatal(err)
		}
		avoidWindowEdge(time.Hour)
		g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": redis, "Body": candidateBody(10)},
			Env: []string{"TG_CAND_TOKEN=" + token}, Args: []string{"--candidate", next}})
		c := &http.Client{Timeout: 10 * time.Second}
		for _, u := range []string{"u0", "u1", "u2", "u3", "u4", "u0"} {
			if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "a", "X-User": u}); r.Status != 200 {
				t.Fatalf("user %s: %d, want 200 live", u, r.Status)
			}
		}
		var rep candidateReport
		deadline := time.Now().Add(10 * time.Second) // hang guard: the last decision may still be counting
		for {
			r := adminDo(t, g, "GET", "/admin/candidate", token)
			if r.Status != 200 {
				t.Fatalf("GET /admin/candidate: %d %s", r.Status, r.Body)
			}
			rep = candidateReport{}
			if err := json.Unmarshal(r.Body, &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Requests >= 6 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rep.Requests != 6 || rep.ExtraDenials != 2 || rep.Limits["users-per-key"].ExtraDenials != 2 || rep.StoreErrors != 0 {
			t.Fatalf("report %+v: want 6 requests, 2 extra denials by users-per-key", rep)
		}
	})
}
