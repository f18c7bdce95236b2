package policy

import (
	"strings"

	"github.com/tollgate/gateway/consumers"
	"github.com/tollgate/gateway/policy/config"
)

// secretSource is where one secret comes from: the environment variable a
// `*_env` key names, or the file a `*_file` key names (the convention of
// Kubernetes Secrets mounted as files). At most one of the two is set.
type secretSource struct {
	// path is the table of the keys, e.g. "store.redis"; key is the stem
	// the two keys share, e.g. "password" for password_env/password_file.
	path, key string
	env, file string
	// required makes an empty value an error (a password, a token); an
	// optional secret (a salt, a list of exempt keys) may be empty.
	required bool
}

func (s secretSource) field(suffix string) string {
	if s.path == "" {
		return s.key + suffix
	}
	return s.path + "." + s.key + suffix
}

// set reports whether either source is configured.
func (s secretSource) set() bool { return s.env != "" || s.file != "" }

// check reports what build can tell without reading anything: both
// sources set, or an invalid variable name.
func (s secretSource) check(e *problems) {
	if s.env != "" && s.file != "" {
		e.add(s.field("_file"), "set only one of %s and %s", s.key+"_env", s.key+"_file")
	}
	if s.env != "" && !consumers.ValidEnvName(s.env) {
		e.add(s.field("_env"), "invalid environment variable name %q", s.env)
	}
	if s.file != "" && strings.TrimSpace(s.file) == "" {
		e.add(s.field("_file"), "empty file name")
	}
}

// read returns the secret from its source at Compile. A file's trailing
// newlines and spaces are dropped: editors add them, and a secret written
// with `echo` ends in one. It is re-read on every reload.
func (s secretSource) read(getenv func(string) string, readFile func(string) ([]byte, error), e *problems) string {
	switch {
	case s.env != "":
		v := getenv(s.env)
		if v == "" && s.required {
			e.add(s.field("_env"), "environment variable %s is empty or unset", s.env)
		}
		return v
	case s.file != "":
		b, err := readFile(s.file)
		if err != nil {
			e.add(s.field("_file"), "%v", err)
			return ""
		}
		v := strings.TrimRight(string(b), " \t\r\n")
		if v == "" && s.required {
			e.add(s.field("_file"), "file %s is empty", s.file)
		}
		return v
	}
	return ""
}

func passwordSource(c config.RedisConfig) secretSource {
	return secretSource{path: "store.redis", key: "password", env: c.PasswordEnv, file: c.PasswordFile, required: true}
}

func tokenSource(c config.AdminConfig) secretSource {
	return secretSource{path: "admin", key: "token", env: c.TokenEnv, file: c.TokenFile, required: true}
}

func saltSource(c config.AccessLogConfig) secretSource {
	return secretSource{path: "access_log", key: "salt", env: c.SaltEnv, file: c.SaltFile}
}

func hs256Source(j config.JWTConfig) secretSource {
	return secretSource{path: "identity.jwt", key: "hs256_secret", env: j.HS256SecretEnv, file: j.HS256SecretFile, required: true}
}

func apiKeysSource(c config.ExemptConfig, path string) secretSource {
	return secretSource{path: path + ".exempt", key: "api_keys", env: c.APIKeysEnv, file: c.APIKeysFile}
}
