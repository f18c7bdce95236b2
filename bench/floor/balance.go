package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// balancer is the least a gateway does to spread requests over several
// targets: round robin by an atomic counter, or least request (two
// different targets drawn at random, the one with fewer requests in
// flight taken), the in-flight count held until the response body is
// closed. No weights, no health, no retries: Tollgate's balancing is
// measured against this.
type balancer struct {
	targets []*floorTarget
	least   bool
	next    atomic.Uint64
	// next RoundTripper of every target.
	transport http.RoundTripper
}

type floorTarget struct {
	u        *url.URL
	inflight atomic.Int64
}

// newBalancer parses a comma-separated list of target URLs.
func newBalancer(list, balance string, transport http.RoundTripper) (*balancer, error) {
	b := &balancer{transport: transport}
	switch balance {
	case "round_robin":
	case "least_request":
		b.least = true
	default:
		return nil, fmt.Errorf("-balance %q: want round_robin or least_request", balance)
	}
	for _, s := range strings.Split(list, ",") {
		u, err := parseUpstream(s)
		if err != nil {
			return nil, err
		}
		b.targets = append(b.targets, &floorTarget{u: u})
	}
	return b, nil
}

func (b *balancer) pick() *floorTarget {
	n := uint64(len(b.targets))
	if !b.least || n == 1 {
		return b.targets[(b.next.Add(1)-1)%n]
	}
	i := rand.Uint64() % n
	j := rand.Uint64() % (n - 1)
	if j >= i {
		j++
	}
	x, y := b.targets[i], b.targets[j]
	if y.inflight.Load() < x.inflight.Load() {
		return y
	}
	return x
}

// RoundTrip sends req (ReverseProxy's own copy) to the picked target.
func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	t := b.pick()
	req.URL.Scheme, req.URL.Host = t.u.Scheme, t.u.Host
	t.inflight.Add(1)
	resp, err := b.transport.RoundTrip(req)
	if err != nil {
		t.inflight.Add(-1)
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

// doneBody ends the request's time in flight when it is closed.
type doneBody struct {
	io.ReadCloser
	t    *floorTarget
	done bool
}

func (d *doneBody) Close() error {
	err := d.ReadCloser.Close()
	if !d.done {
		d.done = true
		d.t.inflight.Add(-1)
	}
	return err
}
