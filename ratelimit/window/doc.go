// Package window holds the algorithms' math: one state type per algorithm
// (a window of one key), and the engine that applies a hit to every window
// of a key (Init, Check, Take, Report, Usage, Expiry). The formulas are
// those of ARCHITECTURE.md "Algorithm math", written in the order given
// there so that the Redis scripts can mirror them bit for bit.
//
// Only stores (and the exact-log referee that judges approximations) use
// this package; everything else speaks the contract at the root of
// ratelimit: Limit, Rate, Hit, Decision, Store. Its callers go through
// the engine: a state's own allow, take and remaining are unexported, and
// what a state still exports (its fields, Init, Expiry, Reported, the
// Reserver and Returner methods, Release, Bytes, Units) is what a store
// or the referee uses on a single state it holds. Time is always a
// parameter: the math takes "now" as a tick count (ratelimit.Tick) and
// never reads the clock itself. It imports only the standard library and
// ratelimit.
package window
