package consumers

import (
	"fmt"
	"strings"
)

// Plaintext key sources: an environment variable or a file (a mounted
// secret). Their keys are hashed at once; the text is not kept.

// envKeys returns the comma-separated keys of the environment variable
// name. An unset or empty variable is a problem: a consumer silently
// without keys would answer 401 to all its clients.
func envKeys(name string, getenv func(string) string) ([]string, error) {
	if !ValidEnvName(name) {
		return nil, fmt.Errorf("invalid environment variable name %q", name)
	}
	var out []string
	for _, k := range strings.Split(getenv(name), ",") {
		if k = strings.TrimSpace(k); k != "" {
			if len(k) > maxKeyLen {
				return out, fmt.Errorf("a key in %s is longer than %d bytes", name, maxKeyLen)
			}
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("environment variable %s is empty or unset", name)
	}
	return out, nil
}

// fileKeys returns the keys of a key file: one a line, surrounding space
// trimmed, blank lines and '#' comments skipped.
func fileKeys(path string, readFile func(string) ([]byte, error)) ([]string, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		k := strings.TrimSpace(line)
		if k == "" || k[0] == '#' {
			continue
		}
		if len(k) > maxKeyLen {
			return out, fmt.Errorf("%s: a key is longer than %d bytes", path, maxKeyLen)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no keys", path)
	}
	return out, nil
}

// ValidEnvName reports whether s is a portable environment variable name
// (letters, digits and '_', not starting with a digit): the one rule for
// every setting that names a variable, here and in the gateway's config.
func ValidEnvName(s string) bool {
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
