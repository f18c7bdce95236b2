package proxy

import (
	"net/http"
	"strings"

	"github.com/tollgate/gateway/keys"
)

// missingPart reports whether the request lacks a value for one of the
// identity parts (api_key, user, header:<Name>) of a limit's key.
func missingPart(parts []keys.Part, id *keys.Identity, r *http.Request) bool {
	for _, p := range parts {
		switch p.Kind {
		case keys.PartAPIKey:
			if id.APIKey == "" {
				return true
			}
		case keys.PartUser:
			if id.User == "" {
				return true
			}
		case keys.PartHeader:
			if r.Header.Get(p.Header) == "" {
				return true
			}
		}
	}
	return false
}

// missingNames lists the identity parts of a key for a 401 body.
func missingNames(parts []keys.Part) string {
	var names []string
	for _, p := range parts {
		switch p.Kind {
		case keys.PartAPIKey:
			names = append(names, "an API key")
		case keys.PartUser:
			names = append(names, "an authenticated user")
		case keys.PartHeader:
			names = append(names, "header "+p.Header)
		}
	}
	return strings.Join(names, " and ")
}
