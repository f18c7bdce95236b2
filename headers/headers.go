// Package headers formats Tollgate's rate-limit response headers (the IETF
// RateLimit / RateLimit-Policy fields, the legacy RateLimit-* trio and the
// X-RateLimit-* trio), its RFC 9457 problem bodies, and the JSON view of a
// client's windows that the admin API and quota routes share.
//
// Everything here is formatting: pure functions of ratelimit decisions, with
// the clock passed in. The package chooses no status codes except in the
// problem bodies it is asked to write.
package headers

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Style is one family of rate-limit response headers. The zero value is
// invalid.
type Style uint8

// The rate-limit header styles.
const (
	// IETF is draft-ietf-httpapi-ratelimit-headers-11: RateLimit-Policy and
	// RateLimit, both structured fields.
	IETF Style = iota + 1
	// Legacy is RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
	// (seconds until reset).
	Legacy
	// X is X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
	// (Unix time of the reset, in seconds).
	X
)

var styleNames = [...]string{IETF: "ietf", Legacy: "legacy", X: "x"}

// String returns the configuration name of s ("ietf", "legacy", "x").
func (s Style) String() string {
	if s == 0 || int(s) >= len(styleNames) {
		return "Style(" + strconv.Itoa(int(s)) + ")"
	}
	return styleNames[s]
}

// ParseStyle maps a configuration name ("ietf", "legacy", "x") to its Style.
func ParseStyle(s string) (Style, error) {
	for i, name := range styleNames {
		if i != 0 && name == s {
			return Style(i), nil
		}
	}
	return 0, fmt.Errorf("unknown header style %q (want ietf, legacy or x)", s)
}

// Styles is the set of header styles a gateway emits; empty emits none
// (Retry-After, which the proxy sets on denials, is not a style).
type Styles []Style

// Has reports whether s contains style.
func (s Styles) Has(style Style) bool {
	for _, x := range s {
		if x == style {
			return true
		}
	}
	return false
}

// Header names, in the canonical form net/http stores them in.
const (
	hPolicy          = "Ratelimit-Policy"
	hRateLimit       = "Ratelimit"
	hLimit           = "Ratelimit-Limit"
	hRemaining       = "Ratelimit-Remaining"
	hReset           = "Ratelimit-Reset"
	hXLimit          = "X-Ratelimit-Limit"
	hXRemaining      = "X-Ratelimit-Remaining"
	hXReset          = "X-Ratelimit-Reset"
	maxHeaderEntries = 8
)

// ItemName is the RateLimit-Policy item name of window index window of l:
// the limit's name when it has at most one window, otherwise the name and
// the window, e.g. "per-client.1s" and "per-client.1m" (a quota's period:
// "monthly.month", "monthly.day"). Names are unique within a limit as long
// as its windows differ.
func ItemName(l *ratelimit.Limit, window int) string {
	if len(l.Rates) <= 1 || window < 0 || window >= len(l.Rates) {
		return l.Name
	}
	return string(appendLabel(append([]byte(l.Name), '.'), l, window))
}

// appendLabel appends the label of window i of l: a quota's period
// ("day", "week", "month"), else the window's length (appendWindowLabel).
func appendLabel(b []byte, l *ratelimit.Limit, i int) []byte {
	if p := l.PeriodOf(i); p != 0 {
		return append(b, p.String()...)
	}
	return appendWindowLabel(b, l.Rates[i].Window)
}

// appendWindowLabel appends a compact, unique spelling of w: the largest
// unit among d, h, m, s, ms and µs ("us") that divides it.
func appendWindowLabel(b []byte, w time.Duration) []byte {
	units := [...]struct {
		d      time.Duration
		suffix string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if w%u.d == 0 {
			return append(strconv.AppendInt(b, int64(w/u.d), 10), u.suffix...)
		}
	}
	return append(strconv.AppendInt(b, int64(w), 10), "ns"...)
}

// appendItemName appends ItemName(l, window) without allocating.
func appendItemName(b []byte, l *ratelimit.Limit, window int) []byte {
	b = appendSFString(b, l.Name, len(l.Rates) > 1 && window >= 0 && window < len(l.Rates), l, window)
	return b
}

// appendSFString appends name (plus the window label when withWindow) as an
// RFC 8941 sf-string: quoted, with '"' and '\' escaped and any byte outside
// printable ASCII replaced by '?'.
func appendSFString(b []byte, name string, withWindow bool, l *ratelimit.Limit, window int) []byte {
	b = append(b, '"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	if withWindow {
		b = appendLabel(append(b, '.'), l, window)
	}
	return append(b, '"')
}

// PolicyValue builds the RateLimit-Policy field value for limits: one item
// `"name";q=L;w=W` per window of every enforced limit (W in seconds, rounded
// up), comma separated; concurrency limits are `"name";q=N`. Shadow limits
// are left out. The result depends on limits alone, so it is byte-identical
// on every response; compute it once per route.
func PolicyValue(limits []*ratelimit.Limit) string {
	return PolicyValueAt(limits, time.Time{})
}

// PolicyValueAt is PolicyValue for a response at now: the window of a
// quota is the length of its calendar period containing now (a day of 23
// or 25 hours across a DST change, a month of 28 to 31 days), or, with a
// zero now, its nominal length (a day, 7 days, 31 days).
func PolicyValueAt(limits []*ratelimit.Limit, now time.Time) string {
	var b []byte
	for _, l := range limits {
		if l == nil || l.Shadow {
			continue
		}
		if l.Algorithm == ratelimit.Concurrency || len(l.Rates) == 0 {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = appendSFString(b, l.Name, false, l, 0)
			b = strconv.AppendInt(append(b, ";q="...), l.MaxInFlight, 10)
			continue
		}
		for i, r := range l.Rates {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = appendItemName(b, l, i)
			b = strconv.AppendInt(append(b, ";q="...), r.Limit, 10)
			w := r.Seconds()
			if l.Algorithm != ratelimit.Quota || now.IsZero() {
				// A uniform window: its length.
			} else if start, end, ok := l.PeriodAt(i, now); ok {
				w = ratelimit.Rate{Limit: 1, Window: end.Sub(start)}.Seconds()
			}
			b = strconv.AppendInt(append(b, ";w="...), w, 10)
		}
	}
	return string(b)
}

// Pick returns the index of the most restrictive enforced decision among
// hits/ds, or -1 if there is none: when any enforced decision denies, the
// denying one with the longest RetryAfter (a Never denial beats every
// other); otherwise the one with the lowest Remaining/Limit. Ties go to the
// earlier hit. Shadow hits are never picked.
func Pick(hits []ratelimit.Hit, ds []ratelimit.Decision) int {
	best := -1
	n := min(len(hits), len(ds))
	for i := 0; i < n; i++ {
		if hits[i].Limit == nil || hits[i].Limit.Shadow {
			continue
		}
		if best < 0 || worse(&ds[i], &ds[best]) {
			best = i
		}
	}
	return best
}

// worse reports whether a is strictly more restrictive than b.
func worse(a, b *ratelimit.Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		if a.Never != b.Never {
			return a.Never
		}
		return a.RetryAfter > b.RetryAfter
	}
	return fraction(a) < fraction(b)
}

// fraction is the remaining share of a decision's window, in [0, 1].
func fraction(d *ratelimit.Decision) float64 {
	if d.Limit <= 0 {
		return 0
	}
	return float64(max(d.Remaining, 0)) / float64(d.Limit)
}

// Set writes the rate-limit headers of every style in styles for the most
// restrictive enforced decision among hits/ds (see Pick); it writes nothing
// when no enforced decision exists. policy is the route's precompiled
// RateLimit-Policy value (see PolicyValue), written as is; now is the
// instant the X-RateLimit-Reset timestamp counts from. A denied decision
// reports zero remaining and a reset no earlier than its RetryAfter, except
// a cost above the capacity (Decision.Never): no wait admits it, so the
// window is reported as it is, its true remaining and the time until more
// becomes available, and with no reset at all (t, RateLimit-Reset and
// X-RateLimit-Reset left out) when nothing is used, so nothing comes back.
// Retry-After itself is left to the caller.
func (wr *Writer) Set(h http.Header, styles Styles, policy string, hits []ratelimit.Hit, ds []ratelimit.Decision, now time.Time) {
	if len(styles) == 0 {
		return
	}
	i := Pick(hits, ds)
	if i < 0 {
		return
	}
	d := &ds[i]
	remaining := max(d.Remaining, 0)
	reset := max(d.Reset, 0)
	noReset := false
	switch {
	case d.Never:
		noReset = reset == 0
	case !d.Allowed:
		remaining = 0
		reset = max(reset, d.RetryAfter)
	}
	t := ceilSeconds(reset)
	// A denied client that keeps asking is answered the same values until
	// its reset moves by a second: the last denial's values are kept and
	// shared (read-only, capacity 1 like every value Set writes), found
	// by what they are built from before anything is formatted.
	var key deniedKey
	if !d.Allowed {
		key = deniedKey{l: hits[i].Limit, window: d.Window, styles: styleMask(styles), policy: policy,
			remaining: remaining, limit: d.Limit, t: t, noReset: noReset}
		if key.styles&(1<<X) != 0 && !noReset {
			key.xReset = unixCeil(now.Add(reset))
		}
		if e := wr.lastDenied.Load(); e != nil && e.key == key {
			for k := 0; k < e.n; k++ {
				h[e.names[k]] = e.vals[k : k+1 : k+1]
			}
			return
		}
	}

	// One buffer holds every value; one string and one backing array for
	// the []string values keep Set to a handful of allocations.
	var arr [256]byte
	b := arr[:0]
	var ends [maxHeaderEntries]int
	var names [maxHeaderEntries]string
	n, policyIdx := 0, -1
	var seen uint8
	for _, s := range styles {
		if s >= 8 || seen&(1<<s) != 0 {
			continue
		}
		seen |= 1 << s
		switch s {
		case IETF:
			if policy != "" {
				policyIdx = n
				names[n], ends[n] = hPolicy, len(b)
				n++
			}
			b = appendItemName(b, hits[i].Limit, d.Window)
			b = strconv.AppendInt(append(b, ";r="...), remaining, 10)
			if !noReset {
				b = strconv.AppendInt(append(b, ";t="...), t, 10)
			}
			names[n], ends[n] = hRateLimit, len(b)
			n++
		case Legacy:
			b = strconv.AppendInt(b, d.Limit, 10)
			names[n], ends[n] = hLimit, len(b)
			b = strconv.AppendInt(b, remaining, 10)
			names[n+1], ends[n+1] = hRemaining, len(b)
			n += 2
			if !noReset {
				b = strconv.AppendInt(b, t, 10)
				names[n], ends[n] = hReset, len(b)
				n++
			}
		case X:
			b = strconv.AppendInt(b, d.Limit, 10)
			names[n], ends[n] = hXLimit, len(b)
			b = strconv.AppendInt(b, remaining, 10)
			names[n+1], ends[n+1] = hXRemaining, len(b)
			n += 2
			if !noReset {
				b = strconv.AppendInt(b, unixCeil(now.Add(reset)), 10)
				names[n], ends[n] = hXReset, len(b)
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	all := string(b)
	vals := make([]string, n)
	start := 0
	for k := 0; k < n; k++ {
		if k == policyIdx {
			vals[k] = policy
		} else {
			vals[k] = all[start:ends[k]]
		}
		start = ends[k]
		h[names[k]] = vals[k : k+1 : k+1]
	}
	if !d.Allowed {
		wr.lastDenied.Store(&setValues{key: key, n: n, names: names, vals: vals})
	}
}

// setValues are the header values one call of Set wrote for a denial,
// with what they were built from.
type setValues struct {
	key   deniedKey
	n     int
	names [maxHeaderEntries]string
	vals  []string
}

// deniedKey is everything a denial's header values are built from: two
// denials with the same key get the same values.
type deniedKey struct {
	l                           *ratelimit.Limit // its name (and window's) in RateLimit
	window                      int
	styles                      uint8 // the styles emitted (styleMask)
	policy                      string
	remaining, limit, t, xReset int64
	noReset                     bool
}

// styleMask is the set of styles in ss, one bit per style.
func styleMask(ss Styles) uint8 {
	var m uint8
	for _, s := range ss {
		if s < 8 {
			m |= 1 << s
		}
	}
	return m
}

// ceilSeconds is d in whole seconds, rounded up, never negative.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// unixCeil is t as Unix seconds, rounded up.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// RetryAfterSeconds converts a wait into a Retry-After value: whole seconds,
// rounded up, at least 1 (a client told "0" would retry at once).
func RetryAfterSeconds(d time.Duration) int64 {
	if d > time.Duration(math.MaxInt64-int64(time.Second)) {
		return int64(math.MaxInt64 / int64(time.Second))
	}
	return max(ceilSeconds(d), 1)
}
