package main

import (
	"net"
	"net/http"
	"strconv"
	"time"
)

// Request headers the soak upstream obeys; the gateway forwards them.
const (
	hSleep  = "X-Upstream-Sleep"  // wait this long (Go duration) or until cancelled
	hStatus = "X-Upstream-Status" // answer with this status
	hReset  = "X-Upstream-Reset"  // reset the connection without answering
)

var upstreamBody = []byte(`{"ok":true}` + "\n")

// upstreamHandler is the soak upstream: it answers 200 with a small body,
// or sleeps, fails or resets as the request's headers ask.
func upstreamHandler(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get(hSleep); v != "" {
		d, _ := time.ParseDuration(v)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if r.Header.Get(hReset) != "" {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				conn.Close()
			}
		}
		return
	}
	status := http.StatusOK
	if v := r.Header.Get(hStatus); v != "" {
		status, _ = strconv.Atoi(v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(upstreamBody)
}
