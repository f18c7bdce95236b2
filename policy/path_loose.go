package policy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The loose reading of a normal path is the union of what upstreams do
// with it: every escape decoded, "%2F" read as '/', "//" merged, ";params"
// dropped from each segment (servlet containers), letters compared without
// case (IIS, ASP.NET). Match chooses a route in it as well as on the bytes,
// and rejects a path on which the two choices differ.

// looseKind says how a route's prefix reads in the loose reading.
type looseKind uint8

const (
	// looseSame: as it is, so a plain path matches it loosely only if it
	// matches strictly.
	looseSame looseKind = iota
	// looseFolded: as Route.foldedPrefix, a plain path; a plain request
	// path is compared with that byte for byte.
	looseFolded
	// looseFull: only through the loose reader (a non-ASCII escape, whose
	// case folds beyond ASCII).
	looseFull
)

// foldPrefix returns how the normal prefix p reads loosely, and its loose
// form when that is a plain path (escapes decoded, lower case).
func foldPrefix(p string) (looseKind, string) {
	var b strings.Builder
	for r := (looseReader{s: p}); ; {
		c, ok := r.next()
		if !ok {
			break
		}
		if c != '/' && (byteClass[c]&classPchar == 0 || c == ';') {
			return looseFull, ""
		}
		b.WriteByte(c)
	}
	if b.String() == p {
		return looseSame, ""
	}
	return looseFolded, b.String()
}

// needsLoose reports whether the normal path p could read differently
// loosely than strictly: it has an escape, a ';' or an upper-case letter.
func needsLoose(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '%' || c == ';' || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// NeedsLoose reports whether the normal path p could read differently
// in the loose reading (LoosePath) than as it is.
func NeedsLoose(p string) bool { return needsLoose(p) }

// LoosePath returns the normal path p as the loose reading has it: every
// escape decoded ("%2F" as '/'), "//" merged, each segment's ";params"
// dropped and ASCII letters lower-cased, the path some upstream serves
// for p. A limit's when that reads request.path is also evaluated on it,
// so that a respelling no route check rejects cannot dodge the limit.
func LoosePath(p string) string {
	b := make([]byte, 0, len(p))
	for r := (looseReader{s: p}); ; {
		c, ok := r.next()
		if !ok {
			return string(b)
		}
		b = append(b, c)
	}
}

// looseHasPrefix reports whether prefix is a segment-wise prefix of the
// normal path p under the loose reading, the union of what upstreams do:
// every escape decoded, "%2F" read as '/', "//" merged, ";params" dropped
// from each segment (Java servlet containers), and letters compared
// without case, Unicode included (IIS, ASP.NET).
func looseHasPrefix(p, prefix string) bool {
	pr, xr := looseReader{s: p}, looseReader{s: prefix}
	last := rune(0)
	for {
		x, ok := xr.nextRune()
		if !ok {
			break
		}
		c, ok := pr.nextRune()
		if !ok || !foldEqual(c, x) {
			return false
		}
		last = x
	}
	if last == '/' {
		return true
	}
	c, ok := pr.nextRune()
	return !ok || c == '/'
}

// looseKey returns a string equal for two prefixes exactly when
// samePrefix holds: the loose reading's characters, each replaced by one
// representative of its case-folding orbit (letters lower-cased), bytes
// outside UTF-8 kept apart as 0xFF and their value.
func looseKey(p string) string {
	var b strings.Builder
	r := looseReader{s: p}
	for {
		c, ok := r.nextRune()
		if !ok {
			return b.String()
		}
		switch {
		case c < utf8.RuneSelf:
			b.WriteByte(byte(c))
		case c > unicode.MaxRune:
			b.WriteByte(0xFF)
			b.WriteByte(byte(c - unicode.MaxRune - 1))
		default:
			m := c
			for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
				m = min(m, f)
			}
			if 'A' <= m && m <= 'Z' {
				m += 'a' - 'A'
			}
			b.WriteRune(m)
		}
	}
}

// foldEqual reports whether a and b are equal under Unicode simple case
// folding (as strings.EqualFold compares).
func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf {
		return false // ASCII letters arrive lower-cased
	}
	if a > unicode.MaxRune || b > unicode.MaxRune {
		return false
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}

// looseReader yields a normal path's bytes in the loose reading.
type looseReader struct {
	s     string
	i     int
	slash bool // the last byte yielded was '/'
}

func (r *looseReader) next() (byte, bool) {
	for r.i < len(r.s) {
		c := r.read()
		switch {
		case c == ';':
			for r.i < len(r.s) && r.peek() != '/' {
				r.read()
			}
		case c == '/':
			if !r.slash {
				r.slash = true
				return '/', true
			}
		default:
			r.slash = false
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			return c, true
		}
	}
	return 0, false
}

// nextRune is next for whole UTF-8 characters: a byte that does not start
// a valid sequence is returned as a value beyond unicode.MaxRune, equal
// only to itself.
func (r *looseReader) nextRune() (rune, bool) {
	c, ok := r.next()
	if !ok || c < utf8.RuneSelf {
		return rune(c), ok
	}
	var buf [utf8.UTFMax]byte
	buf[0] = c
	n, start := 1, *r
	for n < utf8.UTFMax && !utf8.FullRune(buf[:n]) {
		c, ok := r.next()
		if !ok {
			break
		}
		buf[n] = c
		n++
	}
	if ru, size := utf8.DecodeRune(buf[:n]); ru != utf8.RuneError && size == n {
		return ru, true
	}
	*r = start
	return unicode.MaxRune + 1 + rune(c), true
}

// read decodes the byte at r.i and moves past it.
func (r *looseReader) read() byte {
	c := r.s[r.i]
	if c == '%' && r.i+2 < len(r.s) {
		if v, ok := unhex2(r.s[r.i+1], r.s[r.i+2]); ok {
			r.i += 3
			return v
		}
	}
	r.i++
	return c
}

func (r *looseReader) peek() byte {
	i := r.i
	c := r.read()
	r.i = i
	return c
}
