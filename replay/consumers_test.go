package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
)

// TestRunKnowsConsumers: entries logged with a consumer replay as that
// consumer of the replayed registry, at its plan's rates; a consumer the
// registry no longer has is an unknown key (401 in reject mode).
func TestRunKnowsConsumers(t *testing.T) {
	dir := t.TempDir()
	sum := sha256.Sum256([]byte("real-key"))
	reg := `
[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["` + hex.EncodeToString(sum[:]) + `"]
[[consumers]]
name = "bob"
api_keys_sha256 = ["` + hex.EncodeToString(make([]byte, 32)) + `"]
`
	if err := os.WriteFile(filepath.Join(dir, "consumers.toml"), []byte(reg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.Consumers.File = filepath.Join(dir, "consumers.toml")
	c.Plans = []config.PlanConfig{{Name: "pro"}}
	l := config.DefaultLimit()
	l.Name, l.Algorithm, l.By, l.Rates = "per-consumer", "fixed_window", []string{"consumer"}, []string{"2/10s"}
	l.PlanRates = map[string][]string{"pro": {"5/10s"}}
	c.Limits = []config.LimitConfig{l}
	r := config.DefaultRoute()
	r.Name, r.Upstream, r.Limits = "api", "http://127.0.0.1:1", []string{"per-consumer"}
	c.Routes = []config.RouteConfig{r}
	p := compile(t, c)
	var es []accesslog.Entry
	for i := range 8 {
		for _, name := range []string{"acme", "bob", "gone"} {
			e := entry(time.Duration(i)*time.Millisecond, "198.51.100.7", "logged-key-"+name, "api", "/x")
			e.Consumer, e.Client, e.ClientKind = name, name, "consumer"
			es = append(es, e)
		}
	}
	replayEachFormat(t, p, es, func(t *testing.T, rep *Report) {
		// acme (pro): 5 of 8; bob (no plan): 2 of 8; gone: 8 × 401.
		lr := limitReport(t, rep, "per-consumer")
		if lr.Allowed != 7 || lr.Denied != 9 {
			t.Errorf("per-consumer allowed %d denied %d, want 7 and 9", lr.Allowed, lr.Denied)
		}
		if got := rep.Outcomes[proxy.OutcomeUnauthorized]; got != 8 {
			t.Errorf("unauthorized %d, want 8 (the consumer the registry lost)", got)
		}
	})
}
