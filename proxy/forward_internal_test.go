package proxy

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy"
)

// TestOwnedHeadersCanonical: the Rewrite deletes the owned headers, and
// the observer reads Referer and User-Agent, by map key, which only finds
// them when their names are canonical.
func TestOwnedHeadersCanonical(t *testing.T) {
	for _, name := range append(append([]string(nil), gatewayOwned...), "Referer", "User-Agent") {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q)", name, c)
		}
	}
}

// TestStripUpgrade: an Upgrade request keeps its Upgrade and Connection
// headers only when every protocol it names is one the route lists in
// upgrades (any case; a listed name allows every version of it); anything
// else, h2c however spelled above all, loses both before it is forwarded,
// so the upstream answers an ordinary request and no tunnel opens. The
// outcome is written out per row.
func TestStripUpgrade(t *testing.T) {
	none := &policy.Route{Name: "plain"}
	ws := &policy.Route{Name: "ws", Upgrades: []string{"websocket"}}
	spdy := &policy.Route{Name: "spdy", Upgrades: []string{"websocket", "spdy/3.1"}}
	for _, tc := range []struct {
		route   *policy.Route
		upgrade []string
		kept    bool
	}{
		{none, []string{"websocket"}, false},
		{none, []string{"WebSocket"}, false},
		{nil, []string{"websocket"}, false},
		{none, []string{"h2c"}, false},
		{ws, []string{"websocket"}, true},
		{ws, []string{"WebSocket"}, true},
		{ws, []string{" WEBSOCKET "}, true},
		{ws, []string{"websocket/13"}, true},
		{ws, []string{"websocket,"}, true},
		{ws, []string{"foo, websocket"}, false},
		{ws, []string{"websocket, foo"}, false},
		{ws, []string{"websocket", "foo"}, false},
		{ws, []string{"websocket, h2c"}, false},
		{ws, []string{"h2c"}, false},
		{ws, []string{"H2C"}, false},
		{ws, []string{" h2c "}, false},
		{ws, []string{"h2"}, false},
		{ws, []string{"websocketx"}, false},
		{ws, []string{"web"}, false},
		{ws, []string{""}, false},
		{ws, []string{" , "}, false},
		{spdy, []string{"SPDY/3.1"}, true},
		{spdy, []string{"spdy/3"}, false},
		{spdy, []string{"spdy"}, false},
		{spdy, []string{"websocket, spdy/3.1"}, true},
	} {
		h := http.Header{"Connection": {"Upgrade"}, "Upgrade": tc.upgrade}
		newOwnedHeaders(tc.route, "", "", "").strip(h, false)
		_, up := h["Upgrade"]
		_, conn := h["Connection"]
		name := "nil"
		if tc.route != nil {
			name = tc.route.Name
		}
		if up != tc.kept || conn != tc.kept {
			t.Errorf("route %s, Upgrade %q: Upgrade kept %v, Connection kept %v; want both %v", name, tc.upgrade, up, conn, tc.kept)
		}
	}
	// No Upgrade: Connection is ReverseProxy's business, not strip's.
	h := http.Header{"Connection": {"keep-alive"}}
	newOwnedHeaders(ws, "", "", "").strip(h, false)
	if _, ok := h["Connection"]; !ok {
		t.Error("a request without Upgrade lost its Connection header")
	}
}

// TestStripOwned: what a client may not send upstream goes, in every
// spelling a CGI-style upstream reads alike; what it may send stays. The
// expectations are written out by hand per header.
func TestStripOwned(t *testing.T) {
	long := "X-A-Very-Long-User-Header-Name-That-Does-Not-Fit-In-The-Length-Mask"
	for _, tc := range []struct {
		name        string
		user        string
		peerTrusted bool
		header      string
		dropped     bool
		consumer    string // the forwarded consumer header; "" for X-Consumer
	}{
		{"owned, canonical", "", false, "X-Real-Ip", true, ""},
		{"owned, respelled", "", false, "X_Real_Ip", true, ""},
		{"owned, respelled lower", "", false, "x-real_ip", true, ""},
		{"owned, trusted peer", "", true, "True-Client-Ip", true, ""},
		{"owned, CDN", "", false, "Cf_Connecting_Ip", true, ""},
		{"owned, gateway user", "", false, "X-Gateway-User", true, ""},
		{"owned, consumer id", "", false, "X_Consumer_Id", true, ""},
		{"path override", "", false, "X-Original-Url", true, ""},
		{"path override, trusted peer", "", true, "X-Rewrite-Url", true, ""},
		{"method override", "", false, "X-Http-Method-Override", true, ""},
		{"method override respelled", "", false, "x_http_method", true, ""},
		{"method override, short", "", false, "X-Method-Override", true, ""},
		{"forwarding, canonical, kept for SetXForwarded", "", false, "X-Forwarded-For", false, ""},
		{"forwarding, respelled", "", false, "X_Forwarded_For", true, ""},
		{"request id respelled", "", false, "X_Request_Id", true, ""},
		{"request id respelled lower", "", true, "x-request_id", true, ""},
		{"request id, canonical", "", false, "X-Request-Id", false, ""},
		{"forwarding, Forwarded respelled", "", false, "FORWARDED", false, ""},
		{"forwarding, proto respelled", "", false, "X_Forwarded_Proto", true, ""},
		{"user header, untrusted", "X-User", false, "X-User", true, ""},
		{"user header, trusted", "X-User", true, "X-User", false, ""},
		{"user header respelled, trusted", "X-User", true, "X_User", true, ""},
		{"long user header, untrusted", long, false, long, true, ""},
		{"long user header, trusted", long, true, long, false, ""},
		{"consumer header", "", false, "X-Consumer", true, ""},
		{"consumer header respelled", "", true, "x_consumer", true, ""},
		{"plan header", "", false, "X-Plan", true, ""},
		{"plan header respelled", "", false, "X_PLAN", true, ""},
		{"same length, not owned", "", false, "X-Real-Io", false, ""},
		{"unrelated", "X-User", false, "User-Agent", false, ""},
		{"api key", "", false, "X-Api-Key", false, ""},
		{"underscore, not owned", "", false, "X_Trace_Id", false, ""},
		// Header names configured with '_' (canonical "X_user"): every
		// spelling is that header, and only a trusted peer's copy in the
		// configured spelling is kept.
		{"underscore user header, untrusted", "X_user", false, "X_user", true, ""},
		{"underscore user header respelled, untrusted", "X_user", false, "X-User", true, ""},
		{"underscore user header, trusted", "X_user", true, "X_user", false, ""},
		{"underscore user header respelled, trusted", "X_user", true, "X-User", true, ""},
		{"underscore consumer header", "", false, "X_consumer", true, "X_consumer"},
		{"underscore consumer header respelled", "", true, "X-Consumer", true, "X_consumer"},
		// Long names: past the length mask, compared one by one.
		{"long owned-looking name", "", false, "X-Real-Ip" + strings.Repeat("-", 60), false, ""},
		{"long user header respelled, trusted", long, true, strings.ReplaceAll(long, "-", "_"), true, ""},
		{"user header one byte longer", "X-User", false, "X-Users", false, ""},
	} {
		h := http.Header{tc.header: {"v", "w"}, "Accept": {"*/*"}}
		consumer := tc.consumer
		if consumer == "" {
			consumer = "X-Consumer"
		}
		newOwnedHeaders(nil, tc.user, consumer, "X-Plan").strip(h, tc.peerTrusted)
		if _, ok := h[tc.header]; ok == tc.dropped {
			t.Errorf("%s: %q kept %v, want dropped %v", tc.name, tc.header, ok, tc.dropped)
		}
		if _, ok := h["Accept"]; !ok {
			t.Errorf("%s: Accept dropped", tc.name)
		}
	}
}

// TestStripOwnedMatchesModel holds strip, which passes names over on
// their length, to the rule written plainly: a name goes when, with '_'
// read as '-' and case ignored, it is an owned name, a respelled
// forwarding header, the consumer or plan header, or the user header in a
// spelling other than the configured one (any spelling, from an untrusted
// peer). Names are drawn from those spellings, one byte longer or
// shorter, and names of 64 bytes and more.
func TestStripOwnedMatchesModel(t *testing.T) {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }
	long := "X-" + strings.Repeat("Long-", 13) + "User" // 69 bytes
	users := []string{"", "X-User", "X_user", long, "X-User-Id-63-X" + strings.Repeat("x", 49)}
	bases := append(append([]string{"Upgrade", "X-Consumer", "X_plan", "Accept", "X-Request-Id"}, gatewayOwned...), forwardingHeaders...)
	bases = append(bases, users[1:]...)
	rng := rand.New(rand.NewPCG(1, 2))
	respell := func(s string) string {
		b := []byte(s)
		for i := range b {
			switch {
			case b[i] == '-' && rng.IntN(3) == 0:
				b[i] = '_'
			case b[i] == '_' && rng.IntN(3) == 0:
				b[i] = '-'
			case rng.IntN(4) == 0:
				b[i] = strings.ToUpper(string(b[i]))[0]
			case rng.IntN(4) == 0:
				b[i] = strings.ToLower(string(b[i]))[0]
			}
		}
		switch rng.IntN(8) {
		case 0:
			b = append(b, 'x')
		case 1:
			b = b[:len(b)-1]
		}
		return string(b)
	}
	for i := range 20000 {
		user := users[rng.IntN(len(users))]
		trusted := rng.IntN(2) == 0
		h := http.Header{}
		for range 1 + rng.IntN(6) {
			h[respell(bases[rng.IntN(len(bases))])] = []string{"v"}
		}
		want := map[string]bool{}
		for name := range h {
			n := norm(name)
			drop := slices.ContainsFunc(gatewayOwned, func(o string) bool { return norm(o) == n }) ||
				strings.Contains(name, "_") && slices.ContainsFunc(forwardingHeaders, func(o string) bool { return norm(o) == n }) ||
				strings.Contains(name, "_") && n == "x-request-id" ||
				n == "x-consumer" || n == "x-plan" ||
				user != "" && n == norm(user) && (name != user || !trusted)
			want[name] = !drop
		}
		before := maps.Clone(h)
		newOwnedHeaders(nil, user, "X-Consumer", "X_plan").strip(h, trusted)
		for name := range before {
			if _, kept := h[name]; kept != want[name] && name != "Upgrade" && name != "Connection" {
				t.Fatalf("case %d (user %q, trusted %v): %q kept %v, want %v", i, user, trusted, name, kept, want[name])
			}
		}
	}
}
