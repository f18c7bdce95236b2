// Package envoyconf reads the configuration files of Envoy's reference rate
// limit service (envoyproxy/ratelimit) as that service reads them — a
// domain, nested descriptors with key, optional value (with * wildcards)
// and rate_limit — and matches a request's descriptors against them the
// way it does: the most specific descriptor path wins (key and value over
// key alone), wildcards match as patterns, an unknown domain or key has
// no limit.
//
// Every rule is compiled into a ratelimit.Limit: an epoch-aligned fixed
// window of the rule's unit, as the reference counts, unless a Tollgate
// extension key on the descriptor (algorithm, burst, precision, penalty)
// picks another algorithm. The package knows nothing of gRPC or HTTP:
// package rls serves what it compiles.
//
// The files are hostile input: a file's size, the YAML nodes visited
// (aliases followed, so an alias bomb stops at the budget), the nesting
// depth and the number of rules are all bounded before anything grows
// with them.
package envoyconf
