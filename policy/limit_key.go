package policy

import (
	"net/http"

	"github.com/tollgate/gateway/keys"
)

// KeyParts returns the parts of l's counter key for a request with identity
// id and headers h: By, or ByIP when the request lacks an identity part and
// on_missing is "ip". ok is false when on_missing is "reject" and a part is
// missing: such a request is answered 401 and counted nowhere.
//
// The live path and the admin API both ask here, so that the admin API
// finds exactly the counter a client's requests hit.
func (l *Limit) KeyParts(id *keys.Identity, h http.Header) (parts []keys.Part, ok bool) {
	if l.OnMissing == OnMissingShared || !keys.Missing(l.By, id, h) {
		return l.By, true
	}
	if l.OnMissing == OnMissingReject {
		return nil, false
	}
	return l.ByIP, true
}
