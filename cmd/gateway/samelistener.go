package main

import "github.com/tollgate/gateway/policy"

// sameListener reports whether two compiled [server] tables need the same
// listener: everything but the TLS files (re-read on reload) must be
// equal, and TLS on or off, with or without client certificates.
func sameListener(a, b policy.Server) bool {
	at, bt := a.TLS, b.TLS
	if (at == nil) != (bt == nil) {
		return false
	}
	if at != nil && ((at.ClientCAFile == "") != (bt.ClientCAFile == "") || at.ClientAuthOptional != bt.ClientAuthOptional) {
		return false
	}
	a.TLS, b.TLS = nil, nil
	// Applied on reload.
	a.GCMinHeap, b.GCMinHeap = 0, 0
	return a == b
}
