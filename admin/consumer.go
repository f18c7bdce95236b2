package admin

import (
	"fmt"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
)

// withConsumer makes the identity parseClient read from client what the
// live path resolves with p's consumer registry: "consumer:NAME" names a
// registered consumer; an API key a consumer owns is that consumer (every
// key of it counts as one client); an API key none owns is no client at
// all in reject mode (such requests are counted nowhere). Without a
// registry it changes nothing.
func withConsumer(p *policy.Policy, client string, id *keys.Identity) error {
	reg := p.Consumers.Registry
	if name, ok := strings.CutPrefix(client, "consumer:"); ok {
		if reg == nil {
			return fmt.Errorf("key: %q: no consumer registry is configured", client)
		}
		c := reg.ByName(name)
		if c == nil {
			return fmt.Errorf("key: no consumer named %q in %s: %w", name, p.Consumers.File, ErrNotFound)
		}
		*id = keys.Identity{Client: c.Name, ClientKind: keys.SourceConsumer, Consumer: c, Plan: c.Plan, PlanIndex: c.PlanIndex}
		return nil
	}
	if reg == nil || id.ClientKind != keys.SourceAPIKey {
		return nil
	}
	c := reg.ByKey(id.APIKey)
	if c == nil {
		if p.Consumers.UnknownKey == keys.UnknownKeyReject {
			return fmt.Errorf("key: no consumer owns this API key, so its requests are answered 401 and counted nowhere")
		}
		return fmt.Errorf("key: no consumer owns this API key, so its requests are counted as the client's next identity (give ip:A or user:U)")
	}
	*id = keys.Identity{Client: c.Name, ClientKind: keys.SourceConsumer, Consumer: c, Plan: c.Plan, PlanIndex: c.PlanIndex, APIKey: id.APIKey}
	return nil
}
