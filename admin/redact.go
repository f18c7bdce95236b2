package admin

import (
	"encoding/json"
	"net/url"
	"strings"
)

// Redact returns v as generic JSON (maps, slices, values) with secrets
// replaced by "REDACTED": the value of every key whose name contains
// "password", "secret" or "token" (except names ending in "_env" or
// "_file", which name where a secret lives rather than hold it), and the
// password of every URL with user info.
func Redact(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	return redact(g), nil
}

const redacted = "REDACTED"

func redact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if secretName(k) {
				if s, ok := e.(string); !ok || s != "" {
					x[k] = redacted
				}
				continue
			}
			x[k] = redact(e)
		}
	case []any:
		for i, e := range x {
			x[i] = redact(e)
		}
	case string:
		return redactURL(x)
	}
	return v
}

func secretName(k string) bool {
	k = strings.ToLower(k)
	if strings.HasSuffix(k, "_env") || strings.HasSuffix(k, "env") || strings.HasSuffix(k, "_file") || strings.HasSuffix(k, "file") {
		return false
	}
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token")
}

// redactURL hides the password of a URL with user info.
func redactURL(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redacted)
		return u.String()
	}
	return s
}
