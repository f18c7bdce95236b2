package policy

import (
	"net/textproto"
	"strings"
)

// validName reports whether s is 1..64 letters, digits, '-', '_' (and '.'
// when dot).
func validName(s string, dot bool) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || dot && c == '.') {
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 9110 token (header names, methods).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func validHeaderName(s string) bool { return isToken(s) }

func canonicalHeader(s string) string { return textproto.CanonicalMIMEHeaderKey(s) }

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
