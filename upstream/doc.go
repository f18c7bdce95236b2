// Package upstream holds the targets of the routes that forward to more
// than one address: which target takes a request (round robin by weight,
// least request, consistent hash), which targets are healthy (active
// probes and passive outlier ejection), the DNS names re-resolved into
// targets, and the retry budget of each route.
//
// A Spec is what the configuration says (package policy compiles it); a
// Pool is a Spec at run time. Pools live in a Registry that outlives
// reloads: a route whose Spec is unchanged keeps its Pool, so a reload
// resets no health, no ejection and no balancing state.
//
// The package knows nothing of routes' limits, nor of how requests are
// proxied: package proxy asks a Pool for a target and tells it how the
// exchange went.
package upstream
