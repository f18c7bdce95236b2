package tomlbound

import (
	"bytes"
	"strconv"
	"strings"
)

// simpleKey walks a bare or quoted key; with keep it returns its value.
func (s *scanner) simpleKey(keep bool) (string, error) {
	start := s.i
	switch s.peek() {
	case '"':
		if s.multiline('"') {
			return "", s.stop("a key cannot be a multi-line string")
		}
		end, err := s.basicString()
		if err != nil || !keep {
			return "", err
		}
		return unescape(s.data[start+1 : end-1]), nil
	case '\'':
		if s.multiline('\'') {
			return "", s.stop("a key cannot be a multi-line string")
		}
		end, err := s.literalString()
		if err != nil || !keep {
			return "", err
		}
		return string(s.data[start+1 : end-1]), nil
	}
	for s.i < len(s.data) && bareKeyByte(s.data[s.i]) {
		s.i++
	}
	if s.i == start {
		return "", s.stop("expected a key")
	}
	if !keep {
		return "", nil
	}
	return string(s.data[start:s.i]), nil
}

func bareKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// multiline reports whether a multi-line string opened by q starts here.
func (s *scanner) multiline(q byte) bool {
	return s.i+2 < len(s.data) && s.data[s.i] == q && s.data[s.i+1] == q && s.data[s.i+2] == q
}

// basicString walks "..." and returns the offset after it.
func (s *scanner) basicString() (int, error) {
	s.i++ // "
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return s.i, nil
		case '\n':
			return 0, s.stop("unterminated string")
		default:
			s.i++
		}
	}
	return 0, s.stop("unterminated string")
}

// literalString walks '...' and returns the offset after it.
func (s *scanner) literalString() (int, error) {
	s.i++ // '
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\'':
			s.i++
			return s.i, nil
		case '\n':
			return 0, s.stop("unterminated string")
		}
		s.i++
	}
	return 0, s.stop("unterminated string")
}

// multilineString walks a multi-line string, basic (escapes) or literal
// (none); up to two quotes just before the closing three are content.
func (s *scanner) multilineString(q byte) error {
	s.i += 3
	for s.i < len(s.data) {
		c := s.data[s.i]
		if c == '\\' && q == '"' {
			s.i += 2
			continue
		}
		if c == q && s.multiline(q) {
			s.i += 3
			for extra := 0; extra < 2 && s.peek() == q; extra++ {
				s.i++
			}
			return nil
		}
		s.i++
	}
	return s.stop("unterminated multi-line string")
}

// scalar walks a number, boolean or date-time: everything up to what may
// follow a value (a local date-time holds a space).
func (s *scanner) scalar() error {
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', ']', '}', '\n', '\r', '#':
			if s.i == start {
				return s.stop("expected a value")
			}
			return nil
		}
		s.i++
	}
	if s.i == start {
		return s.stop("expected a value")
	}
	return nil
}

// unescape decodes the escapes of a basic string's content, as keys
// compare; an escape it does not know is kept as written (go-toml refuses
// the key anyway).
func unescape(b []byte) string {
	if !bytes.Contains(b, []byte{'\\'}) {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			sb.WriteByte(b[i])
			continue
		}
		i++
		c := b[i]
		if r, ok := simpleEscapes[c]; ok {
			sb.WriteByte(r)
			continue
		}
		if n := hexEscapes[c]; n > 0 && i+n < len(b) {
			if r, err := strconv.ParseUint(string(b[i+1:i+1+n]), 16, 32); err == nil {
				sb.WriteRune(rune(r))
				i += n
				continue
			}
		}
		sb.WriteByte('\\')
		sb.WriteByte(c)
	}
	return sb.String()
}

// simpleEscapes and hexEscapes are TOML's escapes (\e and \xHH are TOML
// 1.1's): the byte each stands for, and how many hex digits follow.
var (
	simpleEscapes = map[byte]byte{'b': '\b', 't': '\t', 'n': '\n', 'f': '\f', 'r': '\r', 'e': 0x1b, '"': '"', '\\': '\\'}
	hexEscapes    = map[byte]int{'u': 4, 'U': 8, 'x': 2}
)
