package listener

import (
	"log/slog"
	"slices"
	"time"
)

// Watch re-reads the certificates whenever one of their files changes on
// disk (checked every interval: a poll sees a rename over the file, a
// symbolic link re-pointed and a write in place alike, where a watch on
// the file would lose track of a renamed inode). A set that fails to load
// is logged and the previous one keeps serving; the next change is tried
// again. The returned function stops the watch.
func (c *Certs) Watch(interval time.Duration, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		last := c.cur.Load().stamps
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			set := c.cur.Load()
			now := stamps(&set.tls)
			if slices.Equal(now, last) {
				continue
			}
			last = now
			cfg := set.tls
			if err := c.Reload(&cfg); err != nil {
				log.Error("tls certificates changed but do not load; keeping the previous ones", "err", err)
				continue
			}
			log.Info("tls certificates reloaded", "files", len(now))
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
