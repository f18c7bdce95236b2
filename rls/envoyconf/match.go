package envoyconf

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/tollgate/gateway/ratelimit"
)

// Entry is one key and value of a request's descriptor.
type Entry struct {
	Key, Value string
}

// Match is what one descriptor of a request matched.
type Match struct {
	// Rule is the matched rule, nil when none applies (unknown domain or
	// key, or a descriptor deeper or shallower than every rule on its
	// path).
	Rule *Rule
	// byValue has bit i set when entry i was matched by its value (a
	// key_value or a wildcard), not by its key alone.
	byValue uint64
	// shared holds, for an entry matched by a share_threshold wildcard,
	// the pattern it counts under instead of its value; nil when no entry
	// was.
	shared []string
}

// Match finds the rule of one descriptor of domain, as the reference
// does: at each level the entry's key_value, else the first wildcard
// (in file order) that matches key_value, else the entry's key alone; the
// rule applies only if the path ends at the descriptor's last entry.
// scratch is reused for the key_value lookups and returned grown.
func (c *Config) Match(domain string, entries []Entry, scratch []byte) (Match, []byte) {
	var m Match
	if c == nil {
		return m, scratch
	}
	prev := c.domains[domain]
	if prev == nil {
		return m, scratch
	}
	for i, e := range entries {
		scratch = append(append(append(scratch[:0], e.Key...), '_'), e.Value...)
		next := prev.children[string(scratch)]
		wild := false
		if next == nil && len(prev.wildcards) > 0 {
			fk := string(scratch)
			for _, w := range prev.wildcards {
				if wildcardMatch(w.parts, fk) {
					next, wild = prev.children[w.key], true
					break
				}
			}
		}
		if next != nil && i < 64 {
			m.byValue |= 1 << i
		}
		if next == nil {
			next = prev.children[e.Key]
		}
		if next == nil {
			break
		}
		if wild && next.share {
			if m.shared == nil {
				m.shared = make([]string, len(entries))
			}
			m.shared[i] = next.pattern
		}
		if next.rule != nil && i == len(entries)-1 {
			m.Rule = next.rule
		}
		if len(next.children) == 0 {
			break
		}
		prev = next
	}
	return m, scratch
}

// ByValue reports whether entry i of the descriptor was matched by its
// value (the configuration names it in a key_value, or a wildcard of one
// matches it) rather than by its key alone or not at all: such a value
// is the operator's, not only the caller's (the access log writes it as
// it is).
func (m *Match) ByValue(i int) bool { return i >= 0 && i < 64 && m.byValue&(1<<i) != 0 }

// wildcardMatch reports whether value matches a pattern split on '*':
// each '*' matches any run of characters, possibly empty.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		k := strings.Index(rest, p)
		if k < 0 {
			return false
		}
		rest = rest[k+len(p):]
	}
	return true
}

// KeyLen is the length of every counter key AppendKey builds.
const KeyLen = 2 + 22

// AppendKey appends the counter key of a matched descriptor to dst: "{"
// HASH "}", HASH the first 16 bytes of the SHA-256 of the domain and the
// entries, encoded injectively (every string length-prefixed; an entry
// counted under a share_threshold pattern marked apart from a value), in
// base64url without padding. No raw value reaches a store. The whole key
// is a Redis hash tag, so one descriptor's counters stay in one slot.
func (m *Match) AppendKey(dst []byte, domain string, entries []Entry, scratch []byte) ([]byte, []byte) {
	b := appendString(scratch[:0], domain)
	for i, e := range entries {
		b = appendString(b, e.Key)
		if m.shared != nil && m.shared[i] != "" {
			b = append(b, 1)
			b = appendString(b, m.shared[i])
			continue
		}
		b = append(b, 0)
		b = appendString(b, e.Value)
	}
	sum := sha256.Sum256(b)
	dst = append(dst, '{')
	dst = base64.RawURLEncoding.AppendEncode(dst, sum[:16])
	return append(dst, '}'), b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// RequestLimitPath ends the Path of a domain's request-limit rule: the
// metric label and the /admin/top limit name of every descriptor that
// carried its own limit, whatever its values.
const RequestLimitPath = ".(request limit)"

// MaxRequestRules bounds the request-limit rules a Config keeps for
// reuse (one per domain, number and unit seen); past it each call builds
// its own, so callers varying the number cannot grow memory.
const MaxRequestRules = 1024

type reqKey struct {
	domain string
	rpu    uint32
	unit   Unit
}

// RequestLimit returns the rule of a descriptor of domain that carries
// its own limit (RateLimitDescriptor.limit), as the reference reads one:
// it replaces whatever the configured rules say, a fixed window of rpu
// per unit aligned to the epoch, enforced (never shadow or unlimited,
// unnamed). nil when the domain is unknown (the reference then applies
// no limit) or the unit is not one of the seven.
//
// Its counter is keyed by the descriptor's entries (Match{}.AppendKey)
// and the window's length: a new rpu keeps the count, as the reference's
// key holds no rpu, and a new unit starts another.
func (c *Config) RequestLimit(domain string, rpu uint32, unit Unit) *Rule {
	if c == nil || unit.Duration() == 0 {
		return nil
	}
	base := c.requests[domain]
	if base == nil {
		return nil
	}
	k := reqKey{domain, rpu, unit}
	if r, ok := c.reqRules.Load(k); ok {
		return r.(*Rule)
	}
	r := &Rule{Domain: domain, Path: base.Path, RequestsPerUnit: rpu, Unit: unit, Base: base}
	if rpu == 0 {
		r.DenyAll = true
	} else {
		l := &ratelimit.Limit{
			Name:      base.Path,
			Algorithm: ratelimit.FixedWindow,
			Rates:     []ratelimit.Rate{{Limit: int64(rpu), Window: unit.Duration()}},
			Scope:     "rls",
		}
		if err := l.Finish(); err != nil {
			// Every uint32 and unit is a valid fixed window.
			return nil
		}
		r.Limit = l
	}
	// A place is taken before the rule is stored, so concurrent callers
	// never keep more than the bound.
	if c.reqCount.Add(1) > MaxRequestRules {
		c.reqCount.Add(-1)
		return r
	}
	if prev, loaded := c.reqRules.LoadOrStore(k, r); loaded {
		c.reqCount.Add(-1)
		return prev.(*Rule)
	}
	return r
}

// RequestRules returns how many request-limit rules c keeps for reuse.
func (c *Config) RequestRules() int {
	if c == nil {
		return 0
	}
	return int(c.reqCount.Load())
}

// RequestLimitNames lists the name of each domain's request-limit rule
// (domain + RequestLimitPath): the limit name the decisions of
// descriptors carrying their own limit are reported under.
func (c *Config) RequestLimitNames() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.requests))
	for _, r := range c.requests {
		out = append(out, r.Path)
	}
	return out
}
