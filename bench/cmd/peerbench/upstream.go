package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// upstreamBody is what the upstream answers to every request.
var upstreamBody = []byte(`{"ok":true,"service":"bench-upstream"}` + "\n")

// upstreamMain is `peerbench upstream -listen ADDR`: a standard-library
// HTTP/1.1 server with keep-alive that answers 200 and a small body.
func upstreamMain(args []string) int {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	length := strconv.Itoa(len(upstreamBody))
	srv := &http.Server{
		Addr: *listen,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Content-Type"] = []string{"application/json"}
			h["Content-Length"] = []string{length}
			_, _ = w.Write(upstreamBody)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	return 0
}
