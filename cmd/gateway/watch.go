package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long the configuration file must stay quiet after a
// change before it is reloaded: an editor's save or a ConfigMap update is
// several events in a few milliseconds, and they make one reload.
const watchDebounce = 200 * time.Millisecond

// configWatcher reloads the configuration when its file changes
// (server.watch_config). It watches the file's directory, not the file:
// editors replace a file by renaming a new one over it, and Kubernetes
// swaps a ConfigMap by re-pointing the "..data" symlink, and a watch on
// the old inode sees neither. Events are debounced: one
// reload runs once the directory has been quiet for the debounce delay,
// and the reload itself reads the file once and parses it fully before
// anything is swapped. Close stops it.
type configWatcher struct {
	path string // the configuration file, cleaned
	// others returns the other files the configuration reads and a
	// change of which reloads it too (the consumer registry, the rate
	// limit service's YAML); nil for none. An entry may be a glob
	// pattern (rls.envoy_config): a file created, changed or removed
	// that the pattern matches reloads too.
	others   func() []string
	debounce time.Duration
	reload   func() error
	log      *slog.Logger
	fsw      *fsnotify.Watcher

	mu   sync.Mutex
	real string // the file's resolved path at the last reload

	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// watchConfig starts watching path's directory and calls reload, debounced,
// whenever path may have changed. reload is called from one goroutine at a
// time; its error is logged by reload itself and does not stop the watch.
func watchConfig(path string, debounce time.Duration, reload func() error, log *slog.Logger) (*configWatcher, error) {
	return watchFiles(path, nil, debounce, reload, log)
}

// watchFiles is watchConfig that also reloads when one of the files
// others returns changes (asked again after every reload, since the
// configuration names them).
func watchFiles(path string, others func() []string, debounce time.Duration, reload func() error, log *slog.Logger) (*configWatcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	dir := filepath.Dir(abs)
	if err := fsw.Add(dir); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("watch config: directory %s: %w", dir, err)
	}
	w := &configWatcher{
		path: abs, others: others, debounce: debounce, reload: reload, log: log, fsw: fsw,
		done: make(chan struct{}), stopped: make(chan struct{}),
	}
	w.real = w.resolve()
	w.watchOthers()
	go w.loop(fsw.Events, fsw.Errors)
	return w, nil
}

// Close stops the watch and waits for a reload in progress to finish.
func (w *configWatcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		if w.fsw != nil {
			err = w.fsw.Close()
		}
		<-w.stopped
	})
	return err
}

// loop debounces events into reloads until Close.
func (w *configWatcher) loop(events <-chan fsnotify.Event, errs <-chan error) {
	defer close(w.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if w.relevant(ev) {
				timer.Reset(w.debounce)
			}
		case err, ok := <-errs:
			if !ok {
				return
			}
			w.log.Warn("config watch", "err", err)
		case <-timer.C:
			w.fire()
		}
	}
}

// relevant reports whether ev may have changed the configuration file:
// the file itself was written, created, renamed over or removed; or an
// entry of its directory that the file resolves through changed, such as
// a ConfigMap's "..data" symlink. Attribute-only changes are ignored, and
// so are other files of the directory (an access log written beside the
// configuration reloads nothing).
func (w *configWatcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	if filepath.Clean(ev.Name) == w.path {
		return true
	}
	for _, o := range w.otherPaths() {
		if filepath.Clean(ev.Name) == o {
			return true
		}
		if isGlob(o) {
			if ok, _ := filepath.Match(o, filepath.Clean(ev.Name)); ok {
				return true
			}
		}
	}
	if strings.HasPrefix(filepath.Base(ev.Name), "..") {
		return true // Kubernetes' atomic writer: ..data, ..data_tmp, ..<timestamp>
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resolve() != w.real
}

// fire runs one reload, unless the file is empty or missing: an empty
// file is a write still in progress (truncate, then write), and a missing
// one a rename not yet done; the event that completes them reloads.
func (w *configWatcher) fire() {
	fi, err := os.Stat(w.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		w.log.Warn("config watch: file missing; keeping the current configuration", "config", w.path)
		return
	case err == nil && fi.Size() == 0:
		w.log.Warn("config watch: file empty; keeping the current configuration", "config", w.path)
		return
	}
	for _, o := range w.otherPaths() {
		if isGlob(o) {
			continue // a pattern: its files may come and go
		}
		if fi, err := os.Stat(o); err == nil && fi.Size() == 0 {
			// A registry being rewritten (truncate, then write): an empty
			// one would make every key unknown.
			w.log.Warn("config watch: file empty; keeping the current configuration", "file", o)
			return
		}
	}
	w.mu.Lock()
	w.real = w.resolve()
	w.mu.Unlock()
	w.log.Info("config file changed; reloading", "config", w.path)
	_ = w.reload() // reload logs its own result
	w.watchOthers()
}

// isGlob reports whether a watched path is a pattern (filepath.Glob's
// meta characters).
func isGlob(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// otherPaths returns the other watched files, absolute and cleaned.
func (w *configWatcher) otherPaths() []string {
	if w.others == nil {
		return nil
	}
	var out []string
	for _, o := range w.others() {
		if a, err := filepath.Abs(o); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// watchOthers adds the directories of the other files to the watch (a
// directory already watched is added once).
func (w *configWatcher) watchOthers() {
	for _, o := range w.otherPaths() {
		if err := w.fsw.Add(filepath.Dir(o)); err != nil {
			w.log.Warn("config watch: cannot watch a file the configuration reads; reload with SIGHUP", "file", o, "err", err)
		}
	}
}

// resolve returns the file's path with every symlink resolved, or "" when
// it cannot be resolved.
func (w *configWatcher) resolve() string {
	r, err := filepath.EvalSymlinks(w.path)
	if err != nil {
		return ""
	}
	return r
}

// startWatch starts the configuration watcher when server.watch_config is
// set and returns the function that stops it (a no-op otherwise). A
// watcher that cannot start is logged; the gateway serves without it.
func (g *gateway) startWatch() (stop func()) {
	if !g.handler.Policy().Server.WatchConfig {
		return func() {}
	}
	others := func() []string {
		p := g.handler.Policy()
		var out []string
		if f := p.Consumers.File; f != "" {
			out = append(out, f)
		}
		if p.RLS != nil {
			// The rate limit service's YAML, as configured: a glob
			// pattern also reloads when a file it matches appears or
			// goes.
			out = append(out, p.Config.RLS.EnvoyConfig...)
		}
		return out
	}
	w, err := watchFiles(g.path, others, watchDebounce, g.reload, g.log)
	if err != nil {
		g.log.Error("server.watch_config: cannot watch the configuration file; reload with SIGHUP or POST /admin/reload", "err", err)
		return func() {}
	}
	g.log.Info("watching the configuration file", "config", w.path)
	return func() { _ = w.Close() }
}
