package policy

import "strings"

// A request path is normalised once, matched in its normal form, and
// forwarded in that same form: what the route sees is what the upstream
// receives. Paths that upstreams could still read in different ways are
// rejected instead (PathError, answered 400).

// PathError is why a request path was rejected: a spelling that upstreams
// read in different ways, so no route can be chosen safely.
type PathError struct {
	// Reason says what in the path made it ambiguous, e.g. "a backslash
	// (raw or %5C), which some upstreams read as '/'".
	Reason string
}

func (e *PathError) Error() string { return "path rejected: " + e.Reason }

// The rejections, shared so that rejecting allocates nothing.
var (
	errNotRooted   = &PathError{Reason: "it does not start with '/'"}
	errBadEscape   = &PathError{Reason: "a '%' not followed by two hex digits"}
	errBackslash   = &PathError{Reason: "a backslash (raw or %5C), which some upstreams read as '/'"}
	errControl     = &PathError{Reason: "a control character (raw or encoded, e.g. %00)"}
	errDotSlash    = &PathError{Reason: "a dot segment hidden by an encoded slash or a ';' parameter (e.g. ..%2F, ..;), which some upstreams resolve"}
	errAmbiguous   = &PathError{Reason: "it selects a different route when read with ';' parameters dropped, %2F as '/' or letters case-insensitively, as some upstreams read it"}
	errPrefixDelim = &PathError{Reason: "a ';' or an encoded '/' or ';' (upstreams split or strip there)"}
)

// NormalizePath returns the normal form of a request path as the client
// sent it (escaped; the query already removed), or a *PathError.
//
// The normal form (RFC 3986 §6.2.2): percent-encoded unreserved characters
// (ALPHA DIGIT - . _ ~) are decoded, every other escape is kept with
// upper-case hex, bytes not allowed in a path (non-ASCII, '"', '#', '{',
// ...) are percent-encoded, "//" is merged, and "." and ".." segments —
// "%2e" spellings included — are resolved, never above the root; a final
// "/", ".", or ".." leaves a trailing slash. "%2F" and "%3F" stay encoded:
// they are data, not structure. "" is "/".
//
// Rejected: a path not starting with '/' (e.g. "*"), a malformed escape, a
// backslash (raw or %5C), a control character (raw or encoded, %00
// included), and a dot segment that only appears once "%2F", "%5C" or
// "%3B" is decoded or a ";params" suffix is cut ("..%2F", "..;x").
//
// An already normal path is returned as is, without allocating.
func NormalizePath(raw string) (string, error) {
	p, _, err := normalize(raw)
	return p, err
}

// normalize is NormalizePath that also reports whether the normal path is
// plain: no escape, ';' or capital, so that it reads loosely as it is.
func normalize(raw string) (p string, plain bool, err error) {
	if raw == "" {
		return "/", true, nil
	}
	if raw[0] != '/' {
		return "", false, errNotRooted
	}
	if normal, plain := isNormal(raw); normal {
		return raw, plain, nil
	}
	p, err = normalizeSlow(raw)
	if err != nil {
		return "", false, err
	}
	return p, !needsLoose(p), nil
}

// normalizeSlow builds the normal form of the rooted path raw.
func normalizeSlow(raw string) (string, error) {
	b := lazybuf{s: raw}
	b.append('/')
	for r := 1; r < len(raw); {
		if raw[r] == '/' { // empty segment: merged
			r++
			continue
		}
		end := r + strings.IndexByte(raw[r:], '/')
		if end < r {
			end = len(raw)
		}
		seg := raw[r:end]
		dots, err := dotSegment(seg)
		if err != nil {
			return "", err
		}
		switch dots {
		case 1: // "."
		case 2: // "..": back to the previous '/', never above the root
			if b.w > 1 {
				b.w--
				for b.w > 0 && b.index(b.w-1) != '/' {
					b.w--
				}
			}
		default:
			if err := b.appendSegment(seg); err != nil {
				return "", err
			}
			if end < len(raw) {
				b.append('/')
			}
		}
		r = end + 1
	}
	return b.string(), nil
}

// isNormal is NormalizePath's fast path: it reports whether the rooted
// path p is certainly normal — only unescaped path characters, no "//",
// and no segment starting with '.' (those take the full check) — and if
// so, whether it is plain (no ';' or capital).
func isNormal(p string) (normal, plain bool) {
	plain = true
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c == '/' {
			if p[i-1] == '/' {
				return false, false
			}
			continue
		}
		k := byteClass[c]
		if k&classPchar == 0 || c == '.' && p[i-1] == '/' {
			return false, false
		}
		if k&classLoose != 0 {
			plain = false
		}
	}
	return true, plain
}

// The byte classes of isNormal.
const (
	classPchar = 1 << iota // may appear unescaped in a segment (pchar)
	classLoose             // reads differently loosely: ';' or a capital
)

// byteClass holds each byte's classes, looked up.
var byteClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		if pchar(byte(c)) {
			t[c] |= classPchar
		}
		if c == ';' || 'A' <= c && c <= 'Z' {
			t[c] |= classLoose
		}
	}
	return t
}()

// dotSegment reports whether the raw segment seg is "." (1) or ".." (2)
// once its unreserved escapes are decoded, or neither (0). A segment that
// is not one but hides one behind an encoded separator or a parameter is
// an error.
func dotSegment(seg string) (int, error) {
	if len(seg) <= 6 { // "%2e%2e"
		n := 0
		for i := 0; i < len(seg); i++ {
			switch {
			case seg[i] == '.':
			case seg[i] == '%' && i+2 < len(seg) && seg[i+1] == '2' && (seg[i+2] == 'e' || seg[i+2] == 'E'):
				i += 2
			default:
				n = -1
			}
			if n < 0 {
				break
			}
			n++
		}
		if n == 1 || n == 2 {
			return n, nil
		}
	}
	if strings.IndexByte(seg, '%') >= 0 || strings.IndexByte(seg, ';') >= 0 {
		if hidesDots(seg) {
			return 0, errDotSlash
		}
	}
	return 0, nil
}

// hidesDots reports whether the segment seg, read as the most liberal
// upstream reads it (every escape decoded, then split at '/' and '\',
// each piece cut at ';'), contains a "." or ".." piece.
func hidesDots(seg string) bool {
	dots, cut := 0, false // dots: '.' seen in the piece so far; -1 once anything else is
	for i := 0; i <= len(seg); i++ {
		c := byte('/')
		if i < len(seg) {
			c = seg[i]
			if c == '%' && i+2 < len(seg) {
				if v, ok := unhex2(seg[i+1], seg[i+2]); ok {
					c = v
					i += 2
				}
			}
		}
		switch {
		case c == '/' || c == '\\':
			if dots == 1 || dots == 2 {
				return true
			}
			dots, cut = 0, false
		case cut:
		case c == ';':
			cut = true
		case c == '.' && dots >= 0:
			dots++
		default:
			dots = -1
		}
	}
	return false
}

// lazybuf builds the normal path, allocating only once it differs from
// the input (as path.Clean does).
type lazybuf struct {
	s   string
	buf []byte
	w   int
}

func (b *lazybuf) index(i int) byte {
	if b.buf != nil {
		return b.buf[i]
	}
	return b.s[i]
}

func (b *lazybuf) append(c byte) {
	if b.buf == nil {
		if b.w < len(b.s) && b.s[b.w] == c {
			b.w++
			return
		}
		b.buf = make([]byte, b.w, len(b.s)+16)
		copy(b.buf, b.s[:b.w])
	}
	b.buf = append(b.buf[:b.w], c)
	b.w++
}

func (b *lazybuf) appendEscape(v byte) {
	const hex = "0123456789ABCDEF"
	b.append('%')
	b.append(hex[v>>4])
	b.append(hex[v&15])
}

func (b *lazybuf) string() string {
	if b.buf == nil {
		return b.s[:b.w]
	}
	return string(b.buf[:b.w])
}

// appendSegment appends the raw segment seg (no '/') in normal form.
func (b *lazybuf) appendSegment(seg string) error {
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) {
				return errBadEscape
			}
			v, ok := unhex2(seg[i+1], seg[i+2])
			if !ok {
				return errBadEscape
			}
			i += 2
			switch {
			case v == '\\':
				return errBackslash
			case v < 0x20 || v == 0x7f:
				return errControl
			case unreserved(v):
				b.append(v)
			default:
				b.appendEscape(v)
			}
		case c == '\\':
			return errBackslash
		case c < 0x20 || c == 0x7f:
			return errControl
		case pchar(c):
			b.append(c)
		default:
			b.appendEscape(c)
		}
	}
	return nil
}

// unreserved reports whether c is an RFC 3986 unreserved character.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// pchar reports whether c may appear unencoded in a path segment (RFC 3986
// pchar without pct-encoded): unreserved, sub-delims, ':' and '@'.
func pchar(c byte) bool {
	if unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return false
}

func unhex2(a, b byte) (byte, bool) {
	x, ok1 := unhex(a)
	y, ok2 := unhex(b)
	return x<<4 | y, ok1 && ok2
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
