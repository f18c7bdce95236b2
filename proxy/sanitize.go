package proxy

import "strings"

// sanitize bounds a client-supplied path before it is echoed in a body.
func sanitize(s string) string {
	const max = 256
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
