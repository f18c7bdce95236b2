package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestSecretNeverShows: however a secret reaches text — fmt verbs, JSON,
// slog's handlers, inside a struct — its value does not appear; Reveal
// returns it.
func TestSecretNeverShows(t *testing.T) {
	type holder struct {
		Token Secret
		URL   config.SecretURL
	}
	values := []any{
		Secret("hunter2"),
		config.SecretURL("redis://user:hunter2@h:6379/0"),
		config.SecretURL("rediss://:hunter2@h:6379"),
		config.SecretURL("redis://user:hunter2@h:bad port"), // unparsable: all before '@' hidden
		holder{Token: "hunter2", URL: "redis://u:hunter2@h/0"},
		&holder{Token: "hunter2", URL: "redis://u:hunter2@h/0"},
		RedisStore{URL: "redis://u:hunter2@h/0", Password: "hunter2"},
	}
	for _, v := range values {
		var out []string
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "v", v)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "v", v)
		out = append(out, buf.String())
		for _, o := range out {
			if strings.Contains(o, "hunter2") {
				t.Errorf("%T shows its secret: %s", v, o)
			}
		}
	}
	if Secret("hunter2").Reveal() != "hunter2" || config.SecretURL("redis://:hunter2@h").Reveal() != "redis://:hunter2@h" {
		t.Error("Reveal does not return the value")
	}
	if Secret("").String() != "" || config.SecretURL("redis://h:6379/0").String() != "redis://h:6379/0" {
		t.Error("an empty secret or a URL without a password is changed")
	}
}
