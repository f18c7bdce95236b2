package config

import "net/url"

// CredentialURL is a URL whose user info and query may both carry a
// credential (https://token@host/, https://host/in?key=…): unlike
// SecretURL, which hides only a password, it formats and marshals with
// the whole user info and the query replaced by "REDACTED". Reveal
// returns the URL as written.
type CredentialURL string

// String returns the URL with its user info and query redacted.
func (u CredentialURL) String() string {
	s := string(u)
	if s == "" {
		return ""
	}
	p, err := url.Parse(s)
	if err != nil {
		return redacted
	}
	if p.User != nil {
		p.User = url.User(redacted)
	}
	if p.RawQuery != "" || p.ForceQuery {
		p.RawQuery, p.ForceQuery = redacted, false
	}
	return p.String()
}

// GoString keeps %#v from showing the credentials.
func (u CredentialURL) GoString() string { return `config.CredentialURL("` + u.String() + `")` }

// MarshalText marshals the redacted form.
func (u CredentialURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// Reveal returns the URL as written, credentials included.
func (u CredentialURL) Reveal() string { return string(u) }
