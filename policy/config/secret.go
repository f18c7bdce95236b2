package config

import (
	"net/url"
	"strings"
)

// redacted is what a secret shows instead of itself (as policy.Secret
// does).
const redacted = "REDACTED"

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
func (u SecretURL) GoString() string { return `config.SecretURL("` + u.String() + `")` }

// MarshalText marshals the redacted form.
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// Reveal returns the URL as written, password included.
func (u SecretURL) Reveal() string { return string(u) }
