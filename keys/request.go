package keys

// Reading identity values out of a request: first header values, query
// parameters, header-name syntax.

import (
	"net/http"
	"net/url"
	"strings"
)

// firstHeader returns the first value of the canonical header name, with
// surrounding spaces trimmed.
func firstHeader(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// queryValue returns the unescaped value of the first parameter named name
// in the raw query q, or "" if there is none or it cannot be unescaped.
// Values whose escaped form is longer than 3·maxLen are skipped unescaped.
func queryValue(q, name string, maxLen int) string {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			uk, err := url.QueryUnescape(k)
			if err != nil || uk != name {
				continue
			}
		}
		if len(v) > 3*maxLen+3 {
			return v // too long either way; the caller rejects it
		}
		if !strings.ContainsAny(v, "%+") {
			return v
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			return ""
		}
		return uv
	}
	return ""
}

// WithoutQueryParam returns the raw query q without every parameter whose
// name, read as queryValue reads it, is name; the other parameters are
// kept byte for byte, in order (nothing is decoded and encoded again, so
// an upstream that signs or parses the query sees what the client sent).
func WithoutQueryParam(q, name string) string {
	if name == "" || q == "" {
		return q
	}
	var b strings.Builder
	dropped := false
	for rest := q; ; {
		kv, next, more := strings.Cut(rest, "&")
		k, _, _ := strings.Cut(kv, "=")
		match := k == name
		if !match && strings.ContainsAny(k, "%+") {
			uk, err := url.QueryUnescape(k)
			match = err == nil && uk == name
		}
		if match {
			dropped = true
		} else {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(kv)
		}
		if !more {
			break
		}
		rest = next
	}
	if !dropped {
		return q
	}
	return b.String()
}

// IsToken reports whether s is an HTTP token (RFC 9110 §5.6.2): what a
// header name or a method must be. It is the one check of header names
// for the configuration too.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func canonicalHeader(s string) string { return http.CanonicalHeaderKey(s) }
