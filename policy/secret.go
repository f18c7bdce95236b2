package policy

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
