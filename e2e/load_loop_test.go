package e2e

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// loadLoop is traffic kept up in the background while a test changes the
// gateway (reloads): workers send requests back to back until stop.
type loadLoop struct {
	stopping atomic.Bool
	total    atomic.Int64
	mu       sync.Mutex
	failures []string
	wg       sync.WaitGroup
}

// startLoadLoop starts workers goroutines sending GET requests with c: the
// i-th request of each goes to url and passes when ok accepts its
// response, as next(i) says. An error or a response ok rejects is a
// failure, noted with its URL.
func startLoadLoop(c *http.Client, workers int, next func(i int) (url string, ok func(*response) bool)) *loadLoop {
	l := &loadLoop{}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; !l.stopping.Load(); i++ {
				url, ok := next(i)
				r, err := tryDo(c, "GET", url, nil, nil)
				l.total.Add(1)
				if err == nil && ok(r) {
					continue
				}
				l.mu.Lock()
				if err != nil {
					l.failures = append(l.failures, url+": "+err.Error())
				} else {
					l.failures = append(l.failures, url+": "+r.String())
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stop ends the load, waits for its requests in flight, and returns how
// many requests were sent and the failures among them.
func (l *loadLoop) stop() (total int64, failures []string) {
	l.stopping.Store(true)
	l.wg.Wait()
	return l.total.Load(), l.failures
}
