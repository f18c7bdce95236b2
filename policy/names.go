package policy

import (
	"net/textproto"

	"github.com/tollgate/gateway/keys"
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

// validHeaderName reports whether s may name a header: one check, keys'.
func validHeaderName(s string) bool { return keys.IsToken(s) }

func canonicalHeader(s string) string { return textproto.CanonicalMIMEHeaderKey(s) }
