package keys

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"time"
)

// Identity is who a request comes from, resolved once per request by
// Identify. Raw values are kept here only for the request's lifetime; keys
// built from them are hashes. (The extractor's counter-key cache keeps
// the inputs of up to 1,024 recent keys, raw, for as long as they stay in
// their slots: keyCache.)
type Identity struct {
	// Client is the value of the first source that yielded: the API key,
	// the user, or the client IP's text (unmasked). Raw: it is hashed only
	// when keys are built.
	Client string
	// ClientKind is the source of Client.
	ClientKind Source
	// IP is the client IP (X-Forwarded-For resolved when the peer is
	// trusted), unmasked, zone stripped, IPv4-mapped addresses unmapped.
	// Invalid when RemoteAddr could not be parsed.
	IP netip.Addr
	// IPFallback reports that the selected X-Forwarded-For entry was not a
	// valid address and the peer was used instead.
	IPFallback bool
	// APIKey is the API key, "" if none.
	APIKey string
	// User is the user, "" if none.
	User string
	// MTLS is the subject (RFC 2253 text) of the client certificate the
	// TLS listener verified, "" without one. A certificate the client
	// sent but nobody verified never counts.
	MTLS string
	// Peer is the request's RemoteAddr text; keys use it (under its own
	// kind) only when IP is invalid.
	Peer string
	// Oversize reports that a value (API key, user) was longer than
	// MaxValueLen and therefore ignored.
	Oversize bool
	// TokenRejected reports that a bearer token was presented but failed
	// verification (bad signature or algorithm, expired, not yet valid,
	// wrong audience or issuer, malformed, no user claim).
	TokenRejected bool
	// Consumer is the registered consumer the API key or a verified
	// token names, when the identity source that decided the client is
	// that one; nil otherwise.
	Consumer *Consumer
	// Plan is the client's plan: the consumer's, or a verified token's
	// plan claim naming a configured plan; "" for none.
	Plan string
	// PlanIndex is Plan's position in the configured plans plus one; 0
	// for none.
	PlanIndex int
	// Claims are every claim of the bearer token that was verified, raw;
	// nil without one. Nothing of a token that failed is kept.
	Claims map[string]json.RawMessage
	// UnknownKey reports that the request carried an API key no
	// registered consumer owns (or one too long to be any). The key is
	// not an identity: APIKey is "".
	UnknownKey bool
	// Rejected reports that UnknownKey is set and unknown_api_key is
	// "reject": the request must be answered 401 and counted nowhere.
	Rejected bool
}

// Identify resolves the identity of r. now is the instant against which JWT
// "exp" and "nbf" are checked.
func (e *Extractor) Identify(r *http.Request, now time.Time) Identity {
	id := Identity{Peer: r.RemoteAddr}
	peer, _ := ParseIP(r.RemoteAddr)
	id.IP, id.IPFallback = clientIP(peer, r.Header[xffHeader], e.trusted)
	id.APIKey = e.apiKey(r, &id)
	var tok tokenClaims
	id.User = e.user(r, peer, now, &id, &tok)
	id.Claims = tok.all
	var keyConsumer, tokenConsumer *Consumer
	if e.consumers != nil {
		keyConsumer, tokenConsumer = e.resolveConsumers(&id, &tok)
	}
	id.MTLS = VerifiedSubject(r)
	for _, s := range e.sources {
		switch s {
		case SourceAPIKey:
			if keyConsumer != nil {
				id.setConsumer(keyConsumer)
				id.Client, id.ClientKind = keyConsumer.Name, SourceConsumer
				return id
			}
			id.Client = id.APIKey
		case SourceUser:
			if tokenConsumer != nil {
				id.setConsumer(tokenConsumer)
				id.Client, id.ClientKind = tokenConsumer.Name, SourceConsumer
				return id
			}
			id.Client = id.User
			if id.User != "" && tok.plan != "" {
				id.Plan, id.PlanIndex = e.plan(tok.plan)
			}
		case SourceMTLS:
			id.Client = id.MTLS
		case SourceIP:
			if id.IP.IsValid() {
				id.Client = id.IP.String()
			} else {
				id.Client, s = r.RemoteAddr, SourceRemoteAddr
			}
			id.ClientKind = s
			return id
		}
		if id.Client != "" {
			id.ClientKind = s
			return id
		}
	}
	// No configured source yielded: the client is the IP all the same, so
	// that a key is never empty nor shared by every anonymous client.
	if id.IP.IsValid() {
		id.Client, id.ClientKind = id.IP.String(), SourceIP
	} else {
		id.Client, id.ClientKind = r.RemoteAddr, SourceRemoteAddr
	}
	return id
}

// VerifiedSubject returns the subject of the client certificate that r's
// TLS handshake verified against the configured client CAs, "" when the
// connection is not TLS or no certificate was verified. Only a verified
// chain counts: with client_auth = "optional" a client may send any
// certificate it likes, and Go verifies it only against the client CAs.
func VerifiedSubject(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	return r.TLS.VerifiedChains[0][0].Subject.String()
}

// resolveConsumers finds the consumers the API key and the verified token
// name. An API key no consumer owns is not an identity: it is cleared and
// marked, and in reject mode the identity is marked Rejected.
func (e *Extractor) resolveConsumers(id *Identity, tok *tokenClaims) (byKey, byToken *Consumer) {
	cc := e.consumers
	if id.APIKey != "" {
		byKey = cc.Directory.ByKey(id.APIKey)
		if byKey == nil {
			id.APIKey, id.UnknownKey = "", true
		}
	}
	if tok.consumer != "" {
		byToken = cc.Directory.ByName(tok.consumer)
	}
	id.Rejected = id.UnknownKey && cc.UnknownKey == UnknownKeyReject
	return byKey, byToken
}

// plan returns a configured plan's name and index (from one), or "" and 0
// when name is not a configured plan: a token cannot invent a plan, nor a
// metric label.
func (e *Extractor) plan(name string) (string, int) {
	for i, p := range e.consumers.Plans {
		if p == name {
			return p, i + 1
		}
	}
	return "", 0
}
