package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// uiStatus is the gateway's state as the dashboard shows it: the active
// configuration's version (a hash of it, as /admin/config shows it), the
// last reload, the store's health and the routes' upstream targets.
func (g *gateway) uiStatus(ctx context.Context) any {
	type store struct {
		Backend string `json:"backend"`
		OK      bool   `json:"ok"`
		Error   string `json:"error,omitempty"`
	}
	p := g.handler.Policy()
	cv := ""
	if b, err := json.Marshal(p.Config); err == nil {
		sum := sha256.Sum256(b)
		cv = hex.EncodeToString(sum[:6])
	}
	st := store{Backend: fmt.Sprint(p.Store.Backend), OK: true}
	if err := g.ready(ctx); err != nil {
		st.OK, st.Error = false, err.Error()
	}
	return struct {
		Gateway       string              `json:"gateway"`
		ConfigVersion string              `json:"config_version"`
		LastReload    *reloadResult       `json:"last_reload"`
		Store         store               `json:"store"`
		Upstreams     []upstreamRouteView `json:"upstreams"`
	}{versionString(), cv, g.lastReload.Load(), st, g.dashboardUpstreams()}
}
