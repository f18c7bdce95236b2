package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/childproc"
)

// hostileMiB is the size of the hostile configurations: the admin API's
// body bound, and far more than any configuration needs.
const hostileMiB = 1 << 20

// fillMiB repeats unit between head and tail up to hostileMiB bytes.
func fillMiB(head, unit, tail string) string {
	n := (hostileMiB - len(head) - len(tail)) / len(unit)
	return head + strings.Repeat(unit, n) + tail
}

// numbered writes format for 0, 1, ... while the result stays within
// hostileMiB bytes.
func numbered(format string) string {
	var b strings.Builder
	for i := 0; ; i++ {
		line := fmt.Sprintf(format, i)
		if b.Len()+len(line) > hostileMiB {
			return b.String()
		}
		b.WriteString(line)
	}
}

// hostileShapes are 1 MiB TOML documents of every shape that made a
// decoder work out of proportion to its size, with the bound each must
// be refused by (empty: within the bounds, refused as configuration).
func hostileShapes() []struct{ name, doc, want string } {
	const deep = "nested deeper than 16 levels"
	const entries = "more than 50000 entries"
	const wide = "too many keys in one table"
	half := hostileMiB/2 - 8
	var aot strings.Builder
	for k := 1; aot.Len() < hostileMiB/2; k++ {
		aot.WriteString("[[" + strings.Repeat("a.", k) + "a]]\n")
	}
	return []struct{ name, doc, want string }{
		{"inline tables", fillMiB("a = ", "{b=", "") + strings.Repeat("}", hostileMiB/3), deep},
		{"arrays", "a = " + strings.Repeat("[", half) + strings.Repeat("]", half), deep},
		{"dotted key", "a" + strings.Repeat(".a", half) + " = 1\n", deep},
		{"table header", "[a" + strings.Repeat(".a", half) + "]\n", deep},
		{"arrays of tables nested", aot.String(), deep},
		{"keys", numbered("k%d = 1\n"), wide},
		{"tables", numbered("[t%d]\n"), wide},
		{"inline table keys", "a = {" + numbered("k%d = 1, ") + "}\n", wide},
		{"array elements", fillMiB("a = [", "1,", "]\n"), entries},
		{"arrays of tables", fillMiB("", "[[routes]]\n", ""), entries},
		// Within every bound: 49,999 routes, each refused for its
		// missing name and target, decode in linear time.
		{"routes within the bounds", strings.Repeat("[[routes]]\n", 49_999), ""},
		{"long string", fillMiB(`a = "`, "x", "\"\n"), ""},
	}
}

// TestValidateHostileShapes: `gateway validate` of a 1 MiB configuration
// of any hostile shape exits 2 (invalid) with the bound it passed and
// where, in bounded memory (under 150 MB resident), and never hangs.
// Before the bounds, a few KB of nested inline tables took seconds and
// the 1 MiB files minutes or gigabytes.
func TestValidateHostileShapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range hostileShapes() {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stderr, rssKB := runBounded(t, "validate", "--config", path)
			if code != 2 {
				t.Errorf("exit code %d, want 2 (invalid configuration)", code)
			}
			if tc.want != "" && !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not name the bound %q:\n%.500s", tc.want, stderr)
			}
			if tc.want != "" && !strings.Contains(stderr, filepath.Base(path)+":") {
				t.Errorf("stderr does not locate the problem in the file:\n%.500s", stderr)
			}
			t.Logf("max RSS %d KiB", rssKB)
			if !raceEnabled && rssKB > 150<<10 {
				t.Errorf("max RSS %d KiB for a 1 MiB file, want under 150 MB", rssKB)
			}
		})
	}
}

// runBounded runs the binary with a hang guard of 20 s and returns its exit
// code, stderr and maximum resident set size in KiB.
func runBounded(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := childproc.Bind(exec.CommandContext(ctx, gatewayBin, args...))
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gateway %s still running after 20 s", strings.Join(args[:1], " "))
	}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), rss
}

// TestCandidateHostileShapes: every hostile shape posted as a candidate
// configuration is answered 400 naming the bound, the gateway's peak
// resident memory stays bounded, and it serves on.
func TestCandidateHostileShapes(t *testing.T) {
	t.Parallel()
	const token = "cand-secret"
	g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": "", "Body": candidateBody(10)},
		Env: []string{"TG_CAND_TOKEN=" + token}})
	c := &http.Client{Timeout: 20 * time.Second}
	hdr := map[string]string{"Content-Type": "application/toml", "Authorization": "Bearer " + token}
	for _, tc := range hostileShapes() {
		if tc.want == "" {
			continue
		}
		// The admin API reads at most 1 MiB: trim a closing bracket or
		// two where the shape filled it exactly.
		body := []byte(tc.doc)[:min(len(tc.doc), hostileMiB)]
		r, err := tryDo(c, "POST", g.adminURL("/admin/candidate"), hdr, body)
		if err != nil {
			t.Fatalf("%s: POST: %v", tc.name, err)
		}
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tc.want) {
			t.Errorf("%s: %d %.300s, want 400 naming %q", tc.name, r.Status, r.Body, tc.want)
		}
	}
	if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "k"}); r.Status != 200 {
		t.Fatalf("after the hostile candidates: %d", r.Status)
	}
	hwm := procStatusKB(t, g.cmd.Process.Pid, "VmHWM")
	t.Logf("gateway peak RSS %d KiB", hwm)
	if !raceEnabled && hwm > 150<<10 {
		t.Errorf("gateway peak RSS %d KiB after the hostile candidates, want under 150 MB", hwm)
	}
}

// procStatusKB reads a "Name: N kB" field of /proc/PID/status.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestValidateNotRegular: a configuration path naming a FIFO or
// /dev/zero is refused at once (exit 2, "not a regular file"), where the
// read used to block on the FIFO or never end.
func TestValidateNotRegular(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "gateway.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		code, stderr, _ := runBounded(t, "validate", "--config", path)
		if code != 2 || !strings.Contains(stderr, "not a regular file") {
			t.Errorf("validate --config %s: exit %d\n%s", path, code, stderr)
		}
	}
}
