package keys

import (
	"net/http"
	"strings"
)

// Missing reports whether the identity id or the headers h lack a value for
// one of the identity parts (api_key, user, consumer, header:<Name>) of a
// key: the case a limit's on_missing setting decides.
func Missing(parts []Part, id *Identity, h http.Header) bool {
	for _, p := range parts {
		switch p.Kind {
		case PartAPIKey:
			if id.APIKey == "" {
				return true
			}
		case PartUser:
			if id.User == "" {
				return true
			}
		case PartMTLS:
			if id.MTLS == "" {
				return true
			}
		case PartConsumer:
			if id.Consumer == nil {
				return true
			}
		case PartHeader:
			if h.Get(p.Header) == "" {
				return true
			}
		}
	}
	return false
}

// MissingNames names the identity parts of a key for a client, e.g. "an API
// key and header X-Tenant", for the answer to a request that lacks one.
func MissingNames(parts []Part) string {
	var names []string
	for _, p := range parts {
		switch p.Kind {
		case PartAPIKey:
			names = append(names, "an API key")
		case PartUser:
			names = append(names, "an authenticated user")
		case PartMTLS:
			names = append(names, "a verified client certificate")
		case PartConsumer:
			names = append(names, "a registered consumer's API key")
		case PartHeader:
			names = append(names, "header "+p.Header)
		}
	}
	return strings.Join(names, " and ")
}
