package policy

import (
	"net/url"
	"strings"
)

// redacted is what a secret shows instead of itself.
const redacted = "REDACTED"

// Secret is a value that must never be shown: a password, a token, a salt.
// It formats (fmt's %v, %s, %q), marshals (JSON, text, and so slog) and
// compares in logs as "REDACTED", or "" when empty, whatever its name or
// the field holding it; Reveal returns the value for the one place that
// uses it. The type, not a list of field names, decides what is hidden.
type Secret string

// String returns "REDACTED", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from showing the value.
func (s Secret) GoString() string { return `policy.Secret("` + s.String() + `")` }

// MarshalText marshals the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// SecretURL is a URL that may carry a password in its user info
// (redis://user:pass@host). It formats and marshals with the password
// replaced by "REDACTED"; Reveal returns the URL as written.
type SecretURL string

// String returns the URL with its password, if any, redacted.
func (u SecretURL) String() string {
	s := string(u)
	if !strings.Contains(s, "@") {
		return s
	}
	p, err := url.Parse(s)
	if err != nil {
		// Unparsable: everything before the last '@' may be a password.
		i := strings.LastIndexByte(s, '@')
		return redacted + s[i:]
	}
	if p.User == nil {
		return s
	}
	if _, has := p.User.Password(); has {
		p.User = url.UserPassword(p.User.Username(), redacted)
	}
	return p.String()
}

// GoString keeps %#v from showing the password.
func (u SecretURL) GoString() string { return `policy.SecretURL("` + u.String() + `")` }

// MarshalText marshals the redacted form.
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// Reveal returns the URL as written, password included.
func (u SecretURL) Reveal() string { return string(u) }
