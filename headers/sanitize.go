package headers

import "strings"

// maxEchoLen bounds a client-supplied value echoed in a problem detail.
const maxEchoLen = 256

// Sanitize bounds a client-supplied value (a path, a method, a name)
// before it is echoed in a problem detail: at most 256 bytes, then "…",
// invalid UTF-8 replaced, so that a client cannot make the gateway answer
// with megabytes or with bytes that break a log line or a JSON reader.
func Sanitize(s string) string {
	if len(s) > maxEchoLen {
		s = s[:maxEchoLen] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
