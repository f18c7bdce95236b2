package main

import (
	"github.com/tollgate/gateway/internal/testupstream"
)

// Request headers the soak upstream obeys; the gateway forwards them.
const (
	hSleep  = testupstream.HeaderSleep
	hStatus = testupstream.HeaderStatus
	hReset  = testupstream.HeaderReset
)

// upstreamHandler is the soak upstream: it answers 200 with a small JSON
// body, or sleeps, fails or resets as the request's headers ask.
var upstreamHandler = testupstream.Handler("application/json", []byte(`{"ok":true}`+"\n"))
