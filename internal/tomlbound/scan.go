package tomlbound

import (
	"fmt"
)

// scanner walks a TOML document once, left to right, with an explicit
// stack of the open arrays and inline tables (never recursion), counting
// entries, the depth of every value and the key comparisons go-toml's
// duplicate-key check will make. It is no validator: what it cannot
// follow stops it, and go-toml then names the problem; anything it
// follows, it measures as go-toml will decode it, or larger.
type scanner struct {
	data []byte
	i    int
	lim  Limits

	entries, deepest, compares int
	// tables is the trie of the tables headers name; node 0 is the root.
	// An array of tables leads to its current element, a node of its
	// own, so that each [[a]] starts an empty table as go-toml's does.
	tables map[edge]int
	nodes  []node
	// cur is the current table's node, base its depth, and section the
	// key/value pairs under its header so far.
	cur, base, section int
	// stack holds the open arrays and inline tables of the value being
	// walked.
	stack []frame
	key   []string // scratch: the parts of a header's key
}

// node is a table of the trie.
type node struct {
	// children counts the tables headers created in it.
	children int
	// elem is the current element of an array of tables, else -1.
	elem int
}

// edge is one step in the trie: a key under a node.
type edge struct {
	parent int
	key    string
}

// frame is an open array or inline table at depth level; keys counts an
// inline table's key/value pairs so far.
type frame struct {
	array bool
	level int
	keys  int
}

func (s *scanner) stop(format string, a ...any) error {
	return &syntaxError{off: s.i, msg: fmt.Sprintf(format, a...)}
}

// at records an entry at depth d, starting at offset off. An entry is a
// key/value pair, a table (a header, or a dotted key's part) or an array
// element: each is a map entry or slice element for go-toml and viper.
func (s *scanner) at(d, off int) error {
	s.entries++
	s.deepest = max(s.deepest, d)
	if s.entries > s.lim.Entries {
		return s.limit(off, fmt.Sprintf("more than %d entries (key/value pairs, tables and array elements)", s.lim.Entries))
	}
	if d > s.lim.Depth {
		return s.limit(off, fmt.Sprintf("nested deeper than %d levels (tables, dotted keys, arrays and inline tables)", s.lim.Depth))
	}
	return nil
}

func (s *scanner) limit(off int, msg string) error {
	line, col := position(s.data, off)
	return &LimitError{Line: line, Column: col, Msg: msg}
}

func (s *scanner) eof() bool { return s.i >= len(s.data) }

func (s *scanner) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

func (s *scanner) skipSpace() {
	for s.i < len(s.data) && (s.data[s.i] == ' ' || s.data[s.i] == '\t') {
		s.i++
	}
}

// skipComment skips a comment up to (not including) its newline.
func (s *scanner) skipComment() {
	if s.peek() != '#' {
		return
	}
	for s.i < len(s.data) && s.data[s.i] != '\n' {
		s.i++
	}
}

// skipBlank skips spaces, newlines and comments (between array elements
// and top-level expressions).
func (s *scanner) skipBlank() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		case '#':
			s.skipComment()
		default:
			return
		}
	}
}

// endOfLine expects the rest of the line blank or a comment.
func (s *scanner) endOfLine() error {
	s.skipSpace()
	s.skipComment()
	switch {
	case s.eof():
		return nil
	case s.data[s.i] == '\n':
		s.i++
		return nil
	case s.data[s.i] == '\r' && s.i+1 < len(s.data) && s.data[s.i+1] == '\n':
		s.i += 2
		return nil
	}
	return s.stop("expected the end of the line")
}

// document walks every top-level expression.
func (s *scanner) document() error {
	for {
		s.skipBlank()
		if s.eof() {
			return nil
		}
		var err error
		if s.peek() == '[' {
			err = s.table()
		} else {
			err = s.keyValue()
		}
		if err != nil {
			return err
		}
		if err := s.endOfLine(); err != nil {
			return err
		}
	}
}

// table walks a header, [a.b] or [[a.b]], and makes it the current table.
func (s *scanner) table() error {
	off := s.i
	s.i++ // [
	array := s.peek() == '['
	if array {
		s.i++
	}
	s.skipSpace()
	if _, err := s.keys(true); err != nil {
		return err
	}
	s.skipSpace()
	closing := "]"
	if array {
		closing = "]]"
	}
	if !hasPrefix(s.data[s.i:], closing) {
		return s.stop("expected %q", closing)
	}
	s.i += len(closing)
	if s.nodes == nil {
		s.nodes = []node{{elem: -1}}
		s.tables = make(map[edge]int)
	}
	// Each key is looked up among its table's children, as go-toml
	// does, and passes into an array of tables' current element.
	n, depth := 0, 0
	for j, k := range s.key {
		s.compares += s.nodes[n].children
		next, ok := s.tables[edge{n, k}]
		if !ok {
			next = len(s.nodes)
			s.nodes = append(s.nodes, node{elem: -1})
			s.tables[edge{n, k}] = next
			s.nodes[n].children++
		}
		n = next
		depth++
		if array && j == len(s.key)-1 {
			// A new element.
			s.nodes[n].elem = len(s.nodes)
			s.nodes = append(s.nodes, node{elem: -1})
		}
		if e := s.nodes[n].elem; e >= 0 {
			n = e
			depth++
		}
	}
	s.cur, s.base, s.section = n, depth, 0
	s.entries += len(s.key) - 1 // each part may make a table
	if err := s.at(depth, off); err != nil {
		return err
	}
	return s.budget(off)
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// budget refuses a document whose duplicate-key checks would compare
// more keys than the bound: go-toml compares a key with each sibling
// before it, so time grows with the square of the keys in one table.
func (s *scanner) budget(off int) error {
	if s.compares > s.lim.Compares {
		return s.limit(off, fmt.Sprintf("too many keys in one table: checking them for duplicates takes more than %d comparisons", s.lim.Compares))
	}
	return nil
}

// keyValue walks `key = value` under the current table header.
func (s *scanner) keyValue() error {
	off := s.i
	n, err := s.keys(false)
	if err != nil {
		return err
	}
	level := s.base + n
	// Each part of the key is compared with the siblings before it: at
	// most the tables headers made here and this section's pairs.
	children := 0
	if s.nodes != nil {
		children = s.nodes[s.cur].children
	}
	s.compares += children + n*s.section
	s.section++
	s.skipSpace()
	if s.peek() != '=' {
		return s.stop("expected '=' after a key")
	}
	s.i++
	s.skipSpace()
	s.entries += n - 1 // each part but the last makes a table
	if err := s.at(level, off); err != nil {
		return err
	}
	if err := s.budget(off); err != nil {
		return err
	}
	return s.value(level)
}

// keys walks a dotted key and returns its number of parts; with keep, the
// parts (unquoted) are left in s.key.
func (s *scanner) keys(keep bool) (int, error) {
	s.key = s.key[:0]
	n := 0
	for {
		k, err := s.simpleKey(keep)
		if err != nil {
			return 0, err
		}
		n++
		if keep {
			s.key = append(s.key, k)
		}
		if n > s.lim.Depth {
			return 0, s.limit(s.i, fmt.Sprintf("nested deeper than %d levels (tables, dotted keys, arrays and inline tables)", s.lim.Depth))
		}
		s.skipSpace()
		if s.peek() != '.' {
			return n, nil
		}
		s.i++
		s.skipSpace()
	}
}

// value walks the value of a key at depth level: a scalar, or an array or
// inline table walked with the explicit stack.
func (s *scanner) value(level int) error {
	s.stack = s.stack[:0]
	for {
		// A value at depth level (counted) starts here.
		switch c := s.peek(); {
		case c == '[':
			s.i++
			s.stack = append(s.stack, frame{array: true, level: level})
			s.skipBlank()
			if s.peek() != ']' {
				level++
				if err := s.at(level, s.i); err != nil {
					return err
				}
				continue
			}
			s.i++
			s.stack = s.stack[:len(s.stack)-1]
		case c == '{':
			s.i++
			s.stack = append(s.stack, frame{level: level})
			s.skipBlank()
			if s.peek() != '}' {
				l, err := s.inlineKey()
				if err != nil {
					return err
				}
				level = l
				continue
			}
			s.i++
			s.stack = s.stack[:len(s.stack)-1]
		case c == '"' || c == '\'':
			var err error
			switch {
			case s.multiline(c):
				err = s.multilineString(c)
			case c == '"':
				_, err = s.basicString()
			default:
				_, err = s.literalString()
			}
			if err != nil {
				return err
			}
		default:
			if err := s.scalar(); err != nil {
				return err
			}
		}
		next, err := s.next()
		if err != nil || next < 0 {
			return err
		}
		level = next
	}
}

// next closes the arrays and inline tables a value ends and returns the
// depth of the next value, or -1 when the key's value is complete.
func (s *scanner) next() (int, error) {
	for len(s.stack) > 0 {
		top := s.stack[len(s.stack)-1]
		s.skipBlank()
		switch c := s.peek(); {
		case c == ']' && top.array || c == '}' && !top.array:
			s.i++
			s.stack = s.stack[:len(s.stack)-1]
		case c == ',':
			s.i++
			s.skipBlank()
			if top.array {
				if s.peek() == ']' {
					continue // a trailing comma
				}
				if err := s.at(top.level+1, s.i); err != nil {
					return 0, err
				}
				return top.level + 1, nil
			}
			if s.peek() == '}' {
				continue // a trailing comma (TOML 1.1)
			}
			return s.inlineKey()
		case top.array:
			return 0, s.stop("expected ',' or ']' in an array")
		default:
			return 0, s.stop("expected ',' or '}' in an inline table")
		}
	}
	return -1, nil
}

// inlineKey walks `key =` in the innermost inline table and returns the
// depth of its value (counted).
func (s *scanner) inlineKey() (int, error) {
	off := s.i
	n, err := s.keys(false)
	if err != nil {
		return 0, err
	}
	top := &s.stack[len(s.stack)-1]
	s.compares += n * top.keys
	top.keys++
	if err := s.budget(off); err != nil {
		return 0, err
	}
	s.skipSpace()
	if s.peek() != '=' {
		return 0, s.stop("expected '=' after a key")
	}
	s.i++
	s.skipSpace()
	level := top.level + n
	s.entries += n - 1
	return level, s.at(level, off)
}
