// Package jwks keeps the signing keys of an identity provider: a JSON Web
// Key Set fetched from a URL (or from the jwks_uri of an OpenID Connect
// issuer's discovery document), refreshed on an interval, and fetched again
// when a token names a key it does not know, at a rate forged key IDs
// cannot raise. A Set is a keys.KeySet.
//
// JWK parsing is go-jose's (key material is security-sensitive parsing);
// the fetch and refresh policy is here, because it is the gateway's own:
// one fetch at a time, at most one per UnknownKidEvery for unknown key IDs,
// the last good keys kept through a failing provider.
package jwks

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/internal/logthrottle"
	"github.com/tollgate/gateway/keys"
)

// Bounds on what a provider may send and how long the gateway waits for
// it. They are constants: a provider that needs more is misbehaving.
const (
	// MaxBytes bounds a JWKS or discovery response body.
	MaxBytes = 1 << 20
	// MaxKeys bounds the keys of a set (usable or not).
	MaxKeys = 100
	// MinRSABits and MaxRSABits bound an RSA key's modulus; a key outside
	// is skipped. The modulus sets what a forged signature under a known
	// kid costs, verified before any limit applies: about 0.04 ms at 2048
	// bits, 0.4 ms at 4096 and, were it allowed, 1.5 ms at 8192
	// (BenchmarkForgedSignature). 4096 is also go-jose's own bound
	// (jose.MaxRSAModulusBits), which this one states rather than
	// leaves implicit.
	MinRSABits, MaxRSABits = 2048, 4096
	// MaxKidLen bounds a key ID; a longer one is skipped (a key) or
	// unknown (a token).
	MaxKidLen = 256
	// FetchTimeout bounds one fetch: connection, redirects and body.
	FetchTimeout = 5 * time.Second
	// MaxRedirects bounds the redirects a fetch follows (same scheme).
	MaxRedirects = 3
	// UnknownKidEvery is the least time between two fetches started by a
	// token naming a key the set does not hold.
	UnknownKidEvery = 10 * time.Second
	// UnknownKidWait bounds how long the one request that started such a
	// fetch waits for it; every other request is answered at once.
	UnknownKidWait = 2 * time.Second
	// MinMaxAge and MaxMaxAge clamp a response's Cache-Control max-age,
	// which, when present and shorter than the refresh interval, replaces
	// it until the next fetch.
	MinMaxAge, MaxMaxAge = time.Minute, 24 * time.Hour
	// MinRetry is the first retry delay after a failed fetch; it doubles
	// up to the refresh interval.
	MinRetry = time.Second
	// MaxErrorLen bounds a failed fetch's error text as Status, /readyz
	// and the log carry it: the text may quote what the provider sent (a
	// jwks_uri, a redirect's Location), which a hostile provider makes as
	// long as a response allows.
	MaxErrorLen = 512
)

// Config is what a Set fetches. Two Sets of equal Configs are
// interchangeable: a reload that keeps the Config keeps the Set.
type Config struct {
	// URL is the JWKS URL (jwks_url); "" with Issuer.
	URL string
	// Issuer is the OpenID Connect issuer (oidc_issuer) whose discovery
	// document names the JWKS URL; "" with URL.
	Issuer string
	// Refresh is the interval between fetches; a response's shorter
	// max-age replaces it, a longer one does not.
	Refresh time.Duration
}

// Options are a Set's collaborators.
type Options struct {
	// Client fetches; nil builds one with FetchTimeout and the redirect
	// policy. Its own Timeout, if any, applies too.
	Client *http.Client
	// Logger logs fetch failures (throttled) and recoveries; nil is
	// slog.Default().
	Logger *slog.Logger
	// Fetched, when set, is called after each fetch with its outcome.
	Fetched func(ok bool)
	// Now is the clock (nil: time.Now); tests fake it.
	Now func() time.Time
}

// Status is a Set's state as /readyz and the metrics show it.
type Status struct {
	// Keys is the number of usable keys held.
	Keys int `json:"keys"`
	// LastSuccess is when the held keys were fetched; zero when never.
	LastSuccess time.Time `json:"last_success,omitzero"`
	// Error is the latest fetch's failure, "" when it succeeded.
	Error string `json:"error,omitempty"`
}

// key is one usable key of a set.
type key struct {
	kid string
	alg string // the JWK's own "alg", "" when absent
	pub crypto.PublicKey
}

// keySet is one fetched set, immutable once published.
type keySet struct {
	keys   []key
	byKid  map[string][]int // indexes into keys
	maxAge time.Duration    // the response's clamped max-age, 0 when absent
}

// Errors of a key lookup; they reach the request only as a rejected token.
var (
	ErrUnknownKid = errors.New("jwks: no key with the token's kid")
	ErrNoKid      = errors.New("jwks: token names no kid and the set has not exactly one key for its alg")
	ErrKeyAlg     = errors.New("jwks: the key does not verify the token's alg")
)

// Set is a fetched key set and its refresh. It is safe for concurrent use.
type Set struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	onDone func(bool)
	// kidWait and fetchTimeout are UnknownKidWait and FetchTimeout; the
	// package's tests lengthen them to show who waits on what.
	kidWait, fetchTimeout time.Duration

	cur      atomic.Pointer[keySet]
	mu       sync.Mutex
	inflight chan struct{} // closed when the running fetch ends; nil when none
	kidFetch time.Time     // start of the latest fetch an unknown kid started
	status   Status
	jwksURI  string // discovered from Issuer; "" until discovered
	stop     chan struct{}
	stopped  sync.Once
	throttle logthrottle.Throttle
}

// New returns a Set for cfg that has fetched nothing yet; Start fetches.
func New(cfg Config, o Options) *Set {
	s := &Set{cfg: cfg, client: o.Client, log: o.Logger, now: o.Now, onDone: o.Fetched,
		stop: make(chan struct{}), kidWait: UnknownKidWait, fetchTimeout: FetchTimeout}
	if s.client == nil {
		s.client = NewClient()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Refresh <= 0 {
		s.cfg.Refresh = 5 * time.Minute
	}
	s.cur.Store(&keySet{})
	return s
}

// Config returns the Config the Set was made with.
func (s *Set) Config() Config { return s.cfg }

// Start fetches the set once, waiting at most FetchTimeout, then refreshes
// it in the background until Close. A failed first fetch is not an error
// of Start: the Set holds no key (every token is refused, Status says
// why) and retries.
func (s *Set) Start() {
	s.fetch()
	go s.loop()
}

// Close stops the refresh; a fetch under way finishes on its own.
func (s *Set) Close() {
	s.stopped.Do(func() { close(s.stop) })
}

// Status reports the keys held and the latest fetch's outcome.
func (s *Set) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Keys = len(s.cur.Load().keys)
	return st
}

// loop refreshes the set: after the interval (or the response's shorter
// max-age) when the latest fetch succeeded, sooner and backing off when it failed.
func (s *Set) loop() {
	retry := MinRetry
	for {
		s.mu.Lock()
		failed := s.status.Error != ""
		s.mu.Unlock()
		wait := s.interval()
		if failed {
			wait = min(retry, s.cfg.Refresh)
			retry = min(2*retry, s.cfg.Refresh)
		} else {
			retry = MinRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		s.fetch()
	}
}

// interval is the wait after a successful fetch: the refresh interval, or
// the response's max-age when that is shorter. A max-age never lengthens
// it: the interval is the operator's bound on how long a key the provider
// withdrew (a compromised one) is still trusted, and a provider or a cache
// in front of it saying "a day" must not stretch five minutes to a day.
func (s *Set) interval() time.Duration {
	if ma := s.cur.Load().maxAge; ma > 0 {
		return min(ma, s.cfg.Refresh)
	}
	return s.cfg.Refresh
}

// fetch runs one fetch, or waits for the one under way (singleflight).
func (s *Set) fetch() {
	ch, started := s.begin(false)
	if !started {
		<-ch
		return
	}
	s.run(ch)
}

// begin registers a fetch unless one is under way, whose channel it then
// returns. forKid limits the fetches unknown key IDs start to one per
// UnknownKidEvery; such a fetch that is not allowed returns nil, false.
func (s *Set) begin(forKid bool) (chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight != nil {
		if forKid {
			return nil, false
		}
		return s.inflight, false
	}
	if forKid {
		now := s.now()
		if !s.kidFetch.IsZero() && now.Sub(s.kidFetch) < UnknownKidEvery {
			return nil, false
		}
		s.kidFetch = now
	}
	s.inflight = make(chan struct{})
	return s.inflight, true
}

// run fetches and publishes the set, then ends the fetch ch.
func (s *Set) run(ch chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), s.fetchTimeout)
	ks, err := s.download(ctx)
	cancel()
	s.mu.Lock()
	prevErr := s.status.Error
	if err == nil {
		s.cur.Store(ks)
		s.status.LastSuccess = s.now()
		s.status.Error = ""
	} else {
		s.status.Error = cut(err.Error(), MaxErrorLen)
	}
	errText := s.status.Error
	s.inflight = nil
	s.mu.Unlock()
	close(ch)
	if s.onDone != nil {
		s.onDone(err == nil)
	}
	switch {
	case err != nil:
		if n, ok := s.throttle.Allow(s.now()); ok {
			s.log.Warn("jwks: fetch failed; keeping the last good keys", "url", s.source(), "err", errText,
				"keys", len(s.cur.Load().keys), "suppressed", n)
		}
	case prevErr != "":
		s.log.Info("jwks: fetch succeeded again", "url", s.source(), "keys", len(ks.keys))
	}
}

// source names what the Set fetches, for logs.
func (s *Set) source() string {
	if s.cfg.URL != "" {
		return s.cfg.URL
	}
	return s.cfg.Issuer
}

// VerificationKey implements keys.KeySet. A kid the set does not hold
// starts a fetch when none is under way and none was started by an
// unknown kid within UnknownKidEvery; the request that started it waits
// for it up to UnknownKidWait (and its own context). Every other request
// with an unknown kid is refused at once, so forged key IDs cost the
// provider one fetch per UnknownKidEvery and the requests no wait.
func (s *Set) VerificationKey(ctx context.Context, kid, alg string) (crypto.PublicKey, error) {
	k, err := s.cur.Load().find(kid, alg)
	if !errors.Is(err, ErrUnknownKid) {
		return k, err
	}
	ch, ok := s.begin(true)
	if !ok {
		return nil, err
	}
	go s.run(ch)
	t := time.NewTimer(s.kidWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		return nil, err
	case <-ctx.Done():
		return nil, err
	}
	return s.cur.Load().find(kid, alg)
}

// find looks kid up for alg. A token without kid takes the set's one key
// usable for alg, when there is exactly one. Only a kid the set lacks
// entirely is ErrUnknownKid (worth a fetch); a known kid whose key does
// not fit alg is not.
func (ks *keySet) find(kid, alg string) (crypto.PublicKey, error) {
	if kid == "" {
		var found crypto.PublicKey
		n := 0
		for i := range ks.keys {
			if ks.keys[i].fits(alg) {
				found, n = ks.keys[i].pub, n+1
			}
		}
		if n != 1 {
			return nil, ErrNoKid
		}
		return found, nil
	}
	if len(kid) > MaxKidLen {
		return nil, ErrUnknownKid
	}
	idx, ok := ks.byKid[kid]
	if !ok {
		return nil, ErrUnknownKid
	}
	// Two keys may share a kid (one RSA and one EC key, say): the one that
	// fits alg is taken.
	for _, i := range idx {
		if ks.keys[i].fits(alg) {
			return ks.keys[i].pub, nil
		}
	}
	return nil, ErrKeyAlg
}

// fits reports whether k verifies tokens of alg: its type and curve are
// alg's, and its own "alg", when given, is alg.
func (k *key) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	return keyFits(k.pub, alg)
}

// keyFits reports whether pub is of the type alg verifies with.
func keyFits(pub crypto.PublicKey, alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512":
		_, ok := pub.(*rsa.PublicKey)
		return ok
	case "ES256":
		k, ok := pub.(*ecdsa.PublicKey)
		return ok && k.Curve == elliptic.P256()
	case "ES384":
		k, ok := pub.(*ecdsa.PublicKey)
		return ok && k.Curve == elliptic.P384()
	case "EdDSA":
		_, ok := pub.(ed25519.PublicKey)
		return ok
	}
	return false
}

// A Set supplies the keys of keys.Extractor's token verification.
var _ keys.KeySet = (*Set)(nil)
