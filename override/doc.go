// Package override holds the overrides of limits' numbers as a gateway
// uses them. The store keeps the table (ratelimit.OverrideTable, records
// of ratelimit.Override); Sync is one gateway's copy of it, and Table is
// that copy compiled against the active policy (Compile): per limit, the
// overrides by consumer and by client key, as limits ready to decide,
// which the request path (proxy) and the admin API look up. So an
// override set through any gateway of a fleet applies on every one within
// a poll interval, without a reload.
//
// The table is read whole only when its version changes; a poll that
// finds it unchanged is one small read. Expiry needs no poll: every
// compiled override carries its expiry and is ignored from then on.
//
// What an override of a limit may say, and the subject it is stored
// under, are the policy's rules (policy.OverrideNumbers,
// policy.Limit.OverrideLimit, policy.Policy.OverrideSubject).
package override
