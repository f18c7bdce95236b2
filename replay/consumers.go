package replay

import (
	"strings"

	"github.com/tollgate/gateway/consumers"
	"github.com/tollgate/gateway/keys"
)

// consumerKeyPrefix starts the API key a replayed request of a logged
// consumer carries. Logged keys are base64url hashes, which hold no ':',
// so no logged key reads as one of these.
const consumerKeyPrefix = "consumer:"

// loggedConsumers is the replayed registry seen through the keys replay
// makes up: "consumer:NAME" is NAME's key.
type loggedConsumers struct{ r *consumers.Registry }

func (d loggedConsumers) ByKey(key string) *keys.Consumer {
	if name, ok := strings.CutPrefix(key, consumerKeyPrefix); ok {
		return d.r.ByName(name)
	}
	return nil
}

func (d loggedConsumers) ByName(name string) *keys.Consumer { return d.r.ByName(name) }
