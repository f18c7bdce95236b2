package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// upstreamBody is what the upstream answers to every request.
var upstreamBody = []byte(`{"ok":true,"service":"bench-upstream"}` + "\n")

// upstreamMain is `peerbench upstream -listen ADDR`: a standard-library
// HTTP/1.1 server with keep-alive that answers 200 and a small body.
func upstreamMain(args []string) int {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on, or a comma-separated list (one server on each: the targets of the balancing modes)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	length := strconv.Itoa(len(upstreamBody))
	var srvs []*http.Server
	for _, addr := range strings.Split(*listen, ",") {
		srvs = append(srvs, &http.Server{
			Addr: addr,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				h["Content-Type"] = []string{"application/json"}
				h["Content-Length"] = []string{length}
				_, _ = w.Write(upstreamBody)
			}),
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       120 * time.Second,
		})
	}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		for _, srv := range srvs {
			srv.Close()
		}
	}()
	errs := make(chan error, len(srvs))
	for _, srv := range srvs {
		go func() { errs <- srv.ListenAndServe() }()
	}
	if err := <-errs; err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	return 0
}
