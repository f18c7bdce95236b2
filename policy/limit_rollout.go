package policy

import (
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// DefaultTagHeader is the header a tag limit's over-limit requests are
// forwarded with.
const DefaultTagHeader = "X-Ratelimit-Exceeded"

// Tag is what a limit in mode "tag" adds to a request over it.
type Tag struct {
	// Header is the canonical header name; Value the limit's name.
	Header string
	Value  string
}

// maxJitter bounds retry_after_jitter.
const maxJitter = time.Hour

// compileRollout compiles mode "tag"'s tag_header, enforce_percent and
// retry_after_jitter of c into l.
func compileRollout(l *Limit, c *config.LimitConfig, path string, e *problems) {
	if c.Mode == "tag" {
		h := c.TagHeader
		if h == "" {
			h = DefaultTagHeader
		}
		if !validHeaderName(h) {
			e.add(path+".tag_header", "invalid header name %q", h)
		} else if why := (&headerOwners{}).ownedBy(h, false, false); why != "" {
			e.add(path+".tag_header", "%s", why)
		}
		l.Tag = &Tag{Header: canonicalHeader(h), Value: c.Name}
		if c.OnLimit == "delay" {
			e.add(path+".on_limit", "delay cannot be used with mode = \"tag\": a tag limit never delays a request")
		}
	} else if c.TagHeader != "" {
		e.add(path+".tag_header", "applies only with mode = \"tag\"")
	}
	l.EnforcePercent = c.EnforcePercent
	switch {
	case c.EnforcePercent < 0 || c.EnforcePercent > 100:
		e.add(path+".enforce_percent", "must be in 0..100, got %d", c.EnforcePercent)
	case c.EnforcePercent == 100:
	case c.Mode != "enforce":
		e.add(path+".enforce_percent", "applies only with mode = \"enforce\"")
	case c.Penalty != "":
		e.add(path+".enforce_percent", "cannot be combined with penalty (a shadowed key serves no penalty)")
	case c.OnLimit == "delay":
		e.add(path+".enforce_percent", "cannot be combined with on_limit = \"delay\"")
	}
	if c.RetryAfterJitter != "" {
		if d := duration(c.RetryAfterJitter, path+".retry_after_jitter", true, e); d > maxJitter {
			e.add(path+".retry_after_jitter", "must be at most %s, got %s", maxJitter, c.RetryAfterJitter)
		} else {
			l.Jitter = d
		}
	}
}

// Enforces reports whether l is enforced for the counter key key: for
// every key at 100 percent, else for the keys whose stable hash falls
// below EnforcePercent. A key's hash does not change, so raising the
// percentage only adds keys.
func (l *Limit) Enforces(key string) bool {
	if l.EnforcePercent >= 100 {
		return true
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()%100 < uint64(l.EnforcePercent)
}

// ShadowOf returns the shadow copy of lim, one of l's definitions (l's
// own, a plan's, a consumer's or an override's): the same ID, so it
// counts on the same counters, but it never denies. Copies are kept per
// definition, up to maxTwins.
func (l *Limit) ShadowOf(lim *ratelimit.Limit) *ratelimit.Limit {
	return l.twins.of(lim)
}

// maxTwins bounds the shadow copies kept per limit: its plans and
// consumers are fixed, but overrides compile definitions of their own.
const maxTwins = 4096

// twinCache holds shadow copies of a limit's definitions.
type twinCache struct {
	mu sync.Mutex
	m  map[*ratelimit.Limit]*ratelimit.Limit
}

func (c *twinCache) of(lim *ratelimit.Limit) *ratelimit.Limit {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.m[lim]; t != nil {
		return t
	}
	t := new(ratelimit.Limit)
	*t = *lim
	t.Shadow = true
	// Batching is for enforced limits: a shadowed key is decided exactly
	// (a key is on one side only, so no counter mixes the two).
	t.Batch = nil
	if c.m == nil {
		c.m = make(map[*ratelimit.Limit]*ratelimit.Limit)
	}
	if len(c.m) < maxTwins {
		c.m[lim] = t
	}
	return t
}

// JitterFor returns the wait a denial of key by l adds, 0..l.Jitter: a
// stable hash of the key and of the window index the instant falls in
// (window: the denying window's length), so a client keeps its share
// within a window and clients denied together are spread.
func (l *Limit) JitterFor(key string, now time.Time, window time.Duration) time.Duration {
	if l.Jitter <= 0 {
		return 0
	}
	if window <= 0 {
		window = time.Second
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte(strconv.FormatInt(now.UnixMicro()/window.Microseconds(), 36)))
	ticks := l.Jitter.Microseconds() + 1
	return time.Duration(h.Sum64()%uint64(ticks)) * time.Microsecond
}

// noteExtras records in p what l asks of the request path.
func (p *Policy) noteExtras(l *Limit) {
	p.DenyExtras = p.DenyExtras || l.Answer != nil || l.Jitter > 0
	p.Tags = p.Tags || l.Tag != nil
}
