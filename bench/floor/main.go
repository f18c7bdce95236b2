// Command floor is the least a net/http rate-limiting gateway can do: the
// floor of Tollgate's stack, measured beside it by bench/peer.sh.
//
//	go run ./bench/floor -listen 127.0.0.1:8080 -upstream http://127.0.0.1:9000 -rate 100 -per 1s
//	go run ./bench/floor -upstream http://127.0.0.1:9000,http://127.0.0.1:9001 -balance least_request
//
// With several upstreams, balance.go picks one per request (round robin
// or least request) in a RoundTripper under the ReverseProxy, as Tollgate
// does.
//
// It is an http.Server in front of an httputil.ReverseProxy (Rewrite with
// SetURL and SetXForwarded, the transport settings of Tollgate's upstream
// transport, pooled 32 KiB copy buffers) behind a fixed-window counter per
// client in a map under one mutex. The client is the X-API-Key header, or
// the peer's address without one. Allowed responses carry the same
// RateLimit-Policy and RateLimit headers as Tollgate's "ietf" style; a
// denial is a constant 429 with Tollgate's header set (Retry-After,
// RateLimit-Policy, RateLimit, Content-Type, Cache-Control,
// X-Content-Type-Options, Content-Length) and a problem body of the same
// shape, built once at start.
//
// What it leaves out is what a product adds: route matching, trusted-proxy
// identity, hashed and bounded keys, several algorithms and limits,
// header sanitising, timeouts per route, metrics, reload. The gap between
// Tollgate and this program is the price of those.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := fs.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:9000, or a comma-separated list of targets to balance over (required)")
	balance := fs.String("balance", "round_robin", "with several upstreams: round_robin or least_request")
	rate := fs.Int64("rate", 0, "requests per window and client; 0 means no limit (a plain proxy)")
	per := fs.Duration("per", time.Second, "window of -rate")
	name := fs.String("name", "per-client", "limit name in the rate-limit headers and the 429 body")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h, err := newHandler(*upstream, *balance, *name, *rate, *per, time.Now)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 2
	}
	// The settings of Tollgate's public server with its defaults.
	srv := &http.Server{
		Addr:              *listen,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    65536,
	}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	return 0
}

// parseUpstream checks the upstream URL.
func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-upstream: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("-upstream %q: want http://host:port", s)
	}
	return u, nil
}
