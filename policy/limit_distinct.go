package policy

import (
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// compileDistinct reads c.Distinct: required with algorithm "distinct"
// and refused with the others.
func compileDistinct(l *Limit, c *config.LimitConfig, path string, e *problems) {
	isDistinct := c.Algorithm == ratelimit.Distinct.String()
	switch {
	case c.Distinct == "" && isDistinct:
		e.add(path+".distinct", "is required with algorithm \"distinct\" (what to count the distinct values of: a key part, ip/<bits> or path)")
		return
	case c.Distinct == "":
		return
	case !isDistinct:
		e.add(path+".distinct", "applies only to algorithm \"distinct\"")
		return
	}
	d, err := keys.ParseDistinct(c.Distinct)
	if err != nil {
		e.add(path+".distinct", "%v", err)
		return
	}
	l.Distinct = &d
}

// The value is a key part, an IPv4 network or the path (keys.Distinct).
// An expression as the value (`distinct = '<expression>'`, a JSON body
// field among what it may read) takes its place once limits take
// expressions: compileDistinct compiles it where ParseDistinct parses,
// and DistinctValue hashes its string result under a kind of its own
// (so it never equals a key part's value) where it calls
// keys.Extractor.DistinctValue; everything after the hash is unchanged.

// DistinctValue returns the hash of the value a distinct limit counts for
// a request (keys.Extractor.DistinctValue), 0 for other limits. ok is
// false when the request lacks the value and on_missing is "reject": such
// a request is answered 401 and counted nowhere. Otherwise a missing
// value counts as one value, the missing one.
func (l *Limit) DistinctValue(e *keys.Extractor, id *keys.Identity, v *keys.Values, path string) (h uint64, ok bool) {
	if l.Distinct == nil {
		return 0, true
	}
	h, missing := e.DistinctValue(*l.Distinct, id, v, path)
	if missing && l.OnMissing == OnMissingReject {
		return 0, false
	}
	return h, true
}
