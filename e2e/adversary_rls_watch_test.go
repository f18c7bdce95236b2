package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestRLSWatchYAMLHostile: with server.watch_config, what may happen to
// the watched envoyproxy/ratelimit files. Each step that leaves no
// valid configuration is a failed reload (counted) and the live rules
// and their counts stay: a file rewritten as invalid YAML, as one past
// the 4 MiB bound, emptied (a write in progress), and the files'
// directory deleted. A file swapped for a symlink to another file (an
// atomic symlink swap) is read through the link.
func TestRLSWatchYAMLHostile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ydir := filepath.Join(dir, "rls")
	if err := os.Mkdir(ydir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRLSYAML(t, ydir, "1")
	g := startRLSRest(t, ydir, "watch_config = true", "")
	c := dialRLS(t, g.Port("RLS"))
	expectRLS(t, "first", c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OK, 1, 0)
	edge := filepath.Join(ydir, "edge.yaml")
	failures := func() float64 {
		return scrape(t, g, "")[`tollgate_config_reloads_total{tollgate_result="failure"}`]
	}
	// waitFailed waits for the failed reload a step causes, then checks
	// that the live rule (1 a day, "a" counted once) still decides.
	waitFailed := func(what string, before float64) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second) // a hang guard
		for failures() <= before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no failed reload counted", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
		expectRLS(t, what, c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OVER_LIMIT, 1, 0)
	}
	steps := []struct {
		name  string
		apply func()
	}{
		{"invalid YAML", func() { writeFileAtomic(t, edge, []byte("domain: [edge\ndescriptors: {")) }},
		{"a file past 4 MiB", func() {
			writeFileAtomic(t, edge, []byte(replaceIP(rlsYAML, "9")+"#"+strings.Repeat("x", 5<<20)+"\n"))
		}},
		{"a duplicate domain in a second file", func() { writeFileAtomic(t, filepath.Join(ydir, "dup.yaml"), []byte(replaceIP(rlsYAML, "9"))) }},
		{"an emptied file", func() {
			_ = os.Remove(filepath.Join(ydir, "dup.yaml"))
			if err := os.WriteFile(edge, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, s := range steps {
		before := failures()
		s.apply()
		waitFailed(s.name, before)
	}

	// An atomic symlink swap: edge.yaml becomes a link to v2.yaml (5 a
	// day) in another directory; the count of "a" carries over.
	other := filepath.Join(dir, "v2")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "v2.yaml"), []byte(replaceIP(rlsYAML, "5")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "v2.yaml"), edge+".lnk"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(edge+".lnk", edge); err != nil {
		t.Fatal(err)
	}
	waitRLS(t, "after the symlink swap", func() *rlpb.RateLimitResponse {
		return c.one("edge", desc("remote_address", "peek"), desc("free", "x"))
	}, func(r *rlpb.RateLimitResponse) bool {
		return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 5
	})
	expectRLS(t, "through the link", c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OK, 5, 3)

	// The directory deleted: the pattern matches no file, the reload
	// fails and the rules read last stay.
	before := failures()
	if err := os.RemoveAll(ydir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for failures() <= before {
		if time.Now().After(deadline) {
			t.Fatal("directory deleted: no failed reload counted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	expectRLS(t, "directory deleted", c.one("edge", desc("remote_address", "a")).GetStatuses()[0], rlpb.RateLimitResponse_OK, 5, 2)
}
