package costscan

import "bytes"

// What the JSON scanner expects next.
const (
	jValue        uint8 = iota // a value (document start, after ':' or an array's ',')
	jValueOrClose              // after '[': a value or ']'
	jKeyOrClose                // after '{': a key or '}'
	jKey                       // after an object's ',': a key
	jColon                     // after a key: ':'
	jAfter                     // after a value: ',' or the container's close (or the end)
	jString                    // inside a string (a key when inKey)
	jLiteral                   // inside a number, true, false or null
	jDone                      // the root value is complete: only whitespace may follow
	jBroken                    // not JSON as far as the scanner checks: nothing is read
)

// maxLiteral bounds the bytes of a number kept to be parsed; a longer
// number at the path is Invalid (no integer up to MaxValue needs more).
const maxLiteral = 24

// doc scans one JSON document for the value at a path. The zero value
// is not ready: call reset.
type doc struct {
	path *Path
	st   uint8
	// stack holds one bit per open container (1 = object), depth of them.
	stack [MaxDepth / 64]uint64
	depth int
	// matched is how many of the path's keys the open containers
	// follow: the container at depth d (from 1) is on the path when d ≤
	// matched + 1 and its ancestors matched.
	matched int
	// Inside a key: whether it still equals the path's key of its
	// depth (and that depth is on the path), and how much of it matched.
	inKey, keyOK bool
	keyPos       int
	// hit marks the value being read (or the container just opened) as
	// following the key that matched: the target when the key was the
	// path's last, else a container that extends matched.
	hit bool
	// esc: the previous chunk ended inside a string with an escaping
	// backslash.
	esc bool
	// target: the value being read is the path's value.
	target bool
	lit    [maxLiteral]byte
	nlit   int
	litBad bool
	// found is the last value at the path.
	found Result
	val   int64
}

func (d *doc) reset(p *Path) {
	*d = doc{path: p}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (d *doc) push(obj bool) bool {
	if d.depth >= MaxDepth {
		d.st = jBroken
		return false
	}
	w, b := d.depth/64, uint(d.depth%64)
	if obj {
		d.stack[w] |= 1 << b
	} else {
		d.stack[w] &^= 1 << b
	}
	d.depth++
	return true
}

// top reports whether the innermost open container is an object.
func (d *doc) top() bool {
	i := d.depth - 1
	return d.stack[i/64]&(1<<uint(i%64)) != 0
}

// afterValue sets the state after a complete value.
func (d *doc) afterValue() {
	d.hit, d.target = false, false
	if d.depth == 0 {
		d.st = jDone
	} else {
		d.st = jAfter
	}
}

// beginValue starts the value whose first byte is c.
func (d *doc) beginValue(c byte) {
	switch {
	case c == '{' || c == '[':
		if d.target {
			// The path's value is a container: the path has no number.
			d.found, d.val, d.target = Invalid, 0, false
		}
		obj := c == '{'
		if !d.push(obj) {
			return
		}
		// A container opened under the path's matching key extends the
		// path; an array never does (paths address objects only).
		if d.hit && obj {
			d.matched = d.depth - 1
		}
		d.hit = false
		if obj {
			d.st = jKeyOrClose
		} else {
			d.st = jValueOrClose
		}
	case c == '"':
		if d.target {
			d.found, d.val, d.target = Invalid, 0, false
		}
		d.st, d.inKey = jString, false
	case c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n':
		d.st, d.nlit, d.litBad = jLiteral, 0, false
		d.addLit(c)
	default:
		d.st = jBroken
	}
}

func (d *doc) addLit(c byte) {
	if !d.target {
		return
	}
	if d.nlit == maxLiteral {
		d.litBad = true
		return
	}
	d.lit[d.nlit] = c
	d.nlit++
}

func isLiteralByte(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '+' || c == '-' || c == 'E'
}

// endLiteral records the literal just read when it was the target.
func (d *doc) endLiteral() {
	if d.target {
		d.found, d.val = Invalid, 0
		if !d.litBad {
			if v, ok := parseUint(d.lit[:d.nlit]); ok {
				d.found, d.val = Valid, v
			}
		}
	}
	d.afterValue()
}

// parseUint parses "0" or a digit string without a leading zero naming
// at most MaxValue.
func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 16 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, v <= MaxValue
}

// startKey begins reading a key of the object at the current depth.
func (d *doc) startKey() {
	d.st, d.inKey, d.keyPos = jString, true, 0
	d.keyOK = d.matched == d.depth-1 && d.depth-1 < len(d.path.keys)
}

// keyPart compares the key's next raw bytes with the path's key.
func (d *doc) keyPart(b []byte) {
	if !d.keyOK {
		return
	}
	want := d.path.keys[d.depth-1]
	if d.keyPos+len(b) > len(want) || !bytes.Equal(b, want[d.keyPos:d.keyPos+len(b)]) || bytes.IndexByte(b, '\\') >= 0 {
		d.keyOK = false
		return
	}
	d.keyPos += len(b)
}

// endString ends the string just read.
func (d *doc) endString() {
	if !d.inKey {
		d.afterValue()
		return
	}
	d.inKey = false
	d.st = jColon
	if d.keyOK && d.keyPos == len(d.path.keys[d.depth-1]) {
		// A repeated key replaces its earlier value, and with it what
		// was found under it (decoders keep the last of repeated keys).
		d.found, d.val = None, 0
		d.hit = true
		d.target = d.depth == len(d.path.keys)
	} else {
		d.hit, d.target = false, false
	}
}

// write scans p, the document's next bytes.
func (d *doc) write(p []byte) {
	i := 0
	for i < len(p) {
		switch d.st {
		case jBroken:
			return
		case jString:
			i = d.stringBytes(p, i)
			continue
		case jLiteral:
			c := p[i]
			if isLiteralByte(c) {
				d.addLit(c)
				i++
				continue
			}
			d.endLiteral()
			continue // c is read in the state after the literal
		}
		c := p[i]
		i++
		if isSpace(c) {
			continue
		}
		switch d.st {
		case jValue:
			d.beginValue(c)
		case jValueOrClose:
			if c == ']' {
				d.close(false)
			} else {
				d.beginValue(c)
			}
		case jKeyOrClose:
			switch c {
			case '}':
				d.close(true)
			case '"':
				d.startKey()
			default:
				d.st = jBroken
			}
		case jKey:
			if c == '"' {
				d.startKey()
			} else {
				d.st = jBroken
			}
		case jColon:
			if c == ':' {
				d.st = jValue
			} else {
				d.st = jBroken
			}
		case jAfter:
			switch {
			case c == ',' && d.top():
				d.st = jKey
			case c == ',':
				d.st = jValue
			case c == '}' || c == ']':
				d.close(c == '}')
			default:
				d.st = jBroken
			}
		case jDone:
			d.st = jBroken
		}
	}
}

// close closes the innermost container, which must be an object when obj.
func (d *doc) close(obj bool) {
	if d.depth == 0 || d.top() != obj {
		d.st = jBroken
		return
	}
	d.depth--
	// Back in the container at the new depth: it follows at most the
	// keys of its ancestors.
	if d.matched > d.depth-1 {
		d.matched = max(d.depth-1, 0)
	}
	d.afterValue()
}

// stringBytes reads string content from p[i:]; it returns where the
// scan goes on (len(p) when the string continues in the next chunk).
func (d *doc) stringBytes(p []byte, i int) int {
	for i < len(p) {
		if d.esc {
			// This byte is escaped: part of the string whatever it is.
			d.esc = false
			if d.inKey {
				d.keyOK = false
			}
			i++
			continue
		}
		j := bytes.IndexByte(p[i:], '"')
		if j < 0 {
			seg := p[i:]
			d.esc = trailingBackslashes(seg)%2 == 1
			if d.inKey {
				d.keyPart(seg)
			}
			return len(p)
		}
		if trailingBackslashes(p[i:i+j])%2 == 1 {
			// An escaped quote: the string goes on after it.
			if d.inKey {
				d.keyOK = false
			}
			i += j + 1
			continue
		}
		if d.inKey {
			d.keyPart(p[i : i+j])
		}
		d.endString()
		return i + j + 1
	}
	return i
}

// trailingBackslashes counts the backslashes b ends with.
func trailingBackslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}

// finish ends the document and reports the last value at the path: a
// document read to its complete end (one root value), else None.
func (d *doc) finish() (Result, int64) {
	if d.st == jLiteral && d.depth == 0 {
		d.endLiteral()
	}
	if d.st != jDone {
		return None, 0
	}
	return d.found, d.val
}
