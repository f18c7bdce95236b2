package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloads records what each reload read from the configuration file.
type reloads struct {
	path string
	mu   sync.Mutex
	seen []string
}

func (r *reloads) reload() error {
	b, err := os.ReadFile(r.path)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.seen = append(r.seen, "error: "+err.Error())
		return err
	}
	r.seen = append(r.seen, string(b))
	return nil
}

func (r *reloads) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// waitFor polls until the latest reload read want, or fails after 10 s.
func (r *reloads) waitFor(t *testing.T, step, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := r.snapshot()
		if len(s) > 0 && s[len(s)-1] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: reloads read %q; the last should be %q", step, s, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWatchDebounce feeds the watch loop events at fake instants: a storm
// of three writes 50 ms apart makes exactly one reload, 200 ms after the
// last; attribute changes and other files of the directory reload nothing.
func TestWatchDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gateway.toml")
		writeFile(t, path, "v1")
		r := &reloads{path: path}
		w := &configWatcher{path: path, debounce: 200 * time.Millisecond, reload: r.reload, log: discardLogger(),
			done: make(chan struct{}), stopped: make(chan struct{})}
		w.real = w.resolve()
		events, errs := make(chan fsnotify.Event), make(chan error)
		go w.loop(events, errs)
		defer w.Close()

		step := func(name string, wantReloads int) {
			t.Helper()
			synctest.Wait()
			if got := len(r.snapshot()); got != wantReloads {
				t.Fatalf("%s: %d reloads, want %d (%q)", name, got, wantReloads, r.snapshot())
			}
		}
		for i, content := range []string{"storm 1", "storm 2", "storm 3"} {
			writeFile(t, path, content)
			events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
			time.Sleep(50 * time.Millisecond)
			step("storm write "+string(rune('1'+i)), 0)
		}
		time.Sleep(149 * time.Millisecond) // 199 ms after the last event
		step("199 ms after the storm", 0)
		time.Sleep(2 * time.Millisecond)
		step("201 ms after the storm", 1)
		if got := r.snapshot()[0]; got != "storm 3" {
			t.Fatalf("the reload read %q, want the final file %q", got, "storm 3")
		}

		events <- fsnotify.Event{Name: path, Op: fsnotify.Chmod}
		events <- fsnotify.Event{Name: filepath.Join(dir, "access.log"), Op: fsnotify.Write}
		events <- fsnotify.Event{Name: filepath.Join(dir, "gateway.toml.swp"), Op: fsnotify.Create}
		time.Sleep(time.Second)
		step("chmod and other files", 1)

		events <- fsnotify.Event{Name: filepath.Join(dir, "..data"), Op: fsnotify.Create}
		time.Sleep(time.Second)
		step("a ..data swap", 2)

		writeFile(t, path, "")
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		time.Sleep(time.Second)
		step("an empty file (a write in progress)", 2)

		errs <- os.ErrPermission // logged; the watch goes on
		writeFile(t, path, "v2")
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		time.Sleep(time.Second)
		step("after a watch error", 3)
	})
}

// TestWatchConfigFile watches a real directory: a write in place, a
// rename over the file, a Kubernetes ConfigMap symlink swap and a storm of
// three writes each end with the last reload having read the final file.
func TestWatchConfigFile(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gateway.toml")
		writeFile(t, path, "v1")
		r := &reloads{path: path}
		w, err := watchConfig(path, 50*time.Millisecond, r.reload, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()

		writeFile(t, path, "in place")
		r.waitFor(t, "write in place", "in place")

		writeFile(t, path+".tmp", "renamed over")
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "rename over", "renamed over")

		for i := 1; i <= 3; i++ {
			tmp := filepath.Join(dir, ".gateway.toml.swp")
			writeFile(t, tmp, "storm "+string(rune('0'+i)))
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}
		r.waitFor(t, "storm of 3 writes", "storm 3")

		if err := w.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		n := len(r.snapshot())
		writeFile(t, path, "after close")
		if err := w.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		// Close waited for the loop to end: nothing can reload any more.
		if got := len(r.snapshot()); got != n {
			t.Fatalf("a reload ran after Close: %q", r.snapshot())
		}
	})

	t.Run("configmap", func(t *testing.T) {
		// The layout of a mounted ConfigMap:
		//   gateway.toml -> ..data/gateway.toml
		//   ..data -> ..v1
		//   ..v1/gateway.toml
		// An update writes ..v2, points ..data_tmp at it and renames
		// ..data_tmp over ..data.
		dir := t.TempDir()
		version := func(name, content string) {
			if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, name, "gateway.toml"), content)
		}
		swap := func(name string) {
			tmp := filepath.Join(dir, "..data_tmp")
			if err := os.Symlink(name, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}
		version("..v1", "configmap v1")
		if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "gateway.toml")
		if err := os.Symlink(filepath.Join("..data", "gateway.toml"), path); err != nil {
			t.Fatal(err)
		}
		r := &reloads{path: path}
		w, err := watchConfig(path, 50*time.Millisecond, r.reload, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()

		version("..v2", "configmap v2")
		swap("..v2")
		if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "ConfigMap swap", "configmap v2")

		version("..v3", "configmap v3")
		swap("..v3")
		r.waitFor(t, "second ConfigMap swap", "configmap v3")
	})

	t.Run("missing directory", func(t *testing.T) {
		_, err := watchConfig(filepath.Join(t.TempDir(), "nope", "gateway.toml"), time.Second, func() error { return nil }, discardLogger())
		if err == nil {
			t.Fatal("watching a file in a missing directory: no error")
		}
	})
}

// TestWatchGlobRelevant: an other path that is a pattern (rls.envoy_config)
// makes any file it matches relevant, created or changed, in its own
// directory; a file beside it that it does not match is not.
func TestWatchGlobRelevant(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.toml")
	writeFile(t, path, "v1")
	yaml := filepath.Join(dir, "rls", "*.yaml")
	w := &configWatcher{path: path, others: func() []string { return []string{yaml} }}
	w.real = w.resolve()
	for name, want := range map[string]bool{
		filepath.Join(dir, "rls", "edge.yaml"):     true,
		filepath.Join(dir, "rls", "new.yaml"):      true,
		filepath.Join(dir, "rls", "notes.txt"):     false,
		filepath.Join(dir, "rls", "sub", "x.yaml"): false,
	} {
		for _, op := range []fsnotify.Op{fsnotify.Write, fsnotify.Create, fsnotify.Remove} {
			if got := w.relevant(fsnotify.Event{Name: name, Op: op}); got != want {
				t.Errorf("%s %v: relevant %v, want %v", name, op, got, want)
			}
		}
	}
}
