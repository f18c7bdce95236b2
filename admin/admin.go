// Package admin is Tollgate's admin API, served on the admin listener only:
//
//	GET    /admin/config                    the active configuration, secrets redacted
//	GET    /admin/limits?limit=NAME&key=K   usage of a limit for a client, per window
//	DELETE /admin/limits?limit=NAME&key=K   reset that client's counters of the limit
//	POST   /admin/reload                    reload the configuration
//
// K is the client as the operator knows it (an API key, a user, an IP); the
// main program's Resolve callback turns it into the limit's counter key.
// Errors are RFC 9457 problem bodies. With a token set, every route needs
// "Authorization: Bearer <token>".
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/ratelimit"
)

// ErrNotFound is what Resolve returns (wrapped) for an unknown limit; the
// API answers 404. Any other Resolve error answers 400.
var ErrNotFound = errors.New("not found")

// Options configures Handler. Store and Resolve are required for the
// /admin/limits routes, Config for /admin/config, Reload for
// /admin/reload; a route whose callback is nil answers 501.
type Options struct {
	// Config returns the active configuration; it is encoded as JSON after
	// Redact.
	Config func() any
	// Store holds the counters.
	Store ratelimit.Store
	// Resolve finds the limit named limit in the active configuration and
	// builds the counter key the gateway uses for client key under it.
	Resolve func(limit, key string, q url.Values) (*ratelimit.Limit, string, error)
	// Reload reloads the configuration; its error is reported to the caller.
	Reload func() error
	// Token, when not empty, is the bearer token every request must carry.
	Token string
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// Logger records resets and reloads; nil uses slog.Default().
	Logger *slog.Logger
	// Timeout bounds one store call. Default 5s.
	Timeout time.Duration
}

type handler struct {
	o     Options
	token [sha256.Size]byte
}

// Handler returns the admin API. Mount it at /admin/ on the admin
// listener's mux, never on the public listener.
func Handler(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	h := &handler{o: o}
	var inner http.Handler = h
	if o.Token != "" {
		inner = RequireToken(o.Token, h)
	}
	return inner
}

// RequireToken wraps next so that it answers 401 unless the request carries
// "Authorization: Bearer <token>". The comparison takes constant time.
// An empty token requires nothing.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
			problem(w, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

func problem(w http.ResponseWriter, status int, detail string) {
	headers.WriteProblem(w, headers.Problem{Status: status, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		problem(w, http.StatusInternalServerError, "encoding the response failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// ServeHTTP dispatches the admin routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/admin/config":
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		h.config(w)
	case "/admin/limits":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.usage(w, r)
		case http.MethodDelete:
			h.reset(w, r)
		default:
			allow(w, r, http.MethodGet, http.MethodHead, http.MethodDelete)
		}
	case "/admin/reload":
		if !allow(w, r, http.MethodPost) {
			return
		}
		h.reload(w)
	default:
		problem(w, http.StatusNotFound, "no admin route "+r.Method+" "+sanitize(r.URL.Path))
	}
}

// allow answers 405 unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	problem(w, http.StatusMethodNotAllowed, "method "+sanitize(r.Method)+" not allowed on "+r.URL.Path)
	return false
}

func sanitize(s string) string {
	if len(s) > 128 {
		s = s[:128] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (h *handler) config(w http.ResponseWriter) {
	if h.o.Config == nil {
		problem(w, http.StatusNotImplemented, "configuration not available")
		return
	}
	v, err := Redact(h.o.Config())
	if err != nil {
		problem(w, http.StatusInternalServerError, "encoding the configuration failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// target resolves the limit and key of a /admin/limits request, answering
// the error itself when it fails.
func (h *handler) target(w http.ResponseWriter, r *http.Request) (*ratelimit.Limit, string, bool) {
	if h.o.Store == nil || h.o.Resolve == nil {
		problem(w, http.StatusNotImplemented, "limits are not available")
		return nil, "", false
	}
	q := r.URL.Query()
	name, key := q.Get("limit"), q.Get("key")
	if name == "" {
		problem(w, http.StatusBadRequest, "query parameter \"limit\" is required")
		return nil, "", false
	}
	if !q.Has("key") {
		problem(w, http.StatusBadRequest, "query parameter \"key\" is required (the client: API key, user or IP; empty for a limit keyed by nothing)")
		return nil, "", false
	}
	l, ck, err := h.o.Resolve(name, key, r.URL.Query())
	switch {
	case errors.Is(err, ErrNotFound):
		problem(w, http.StatusNotFound, err.Error())
		return nil, "", false
	case err != nil:
		problem(w, http.StatusBadRequest, err.Error())
		return nil, "", false
	case l == nil:
		problem(w, http.StatusNotFound, "unknown limit "+jsonQuote(name))
		return nil, "", false
	}
	return l, ck, true
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(sanitize(s))
	return string(b)
}

// Usage is the body of GET /admin/limits.
type Usage struct {
	// Limit is the limit's name.
	Limit string `json:"limit"`
	// Algorithm is its algorithm.
	Algorithm string `json:"algorithm"`
	// Mode is "enforce" or "shadow".
	Mode string `json:"mode"`
	// CounterKey is the store key of the client's counters (a hash).
	CounterKey string `json:"counter_key"`
	// Windows is the state of each window, in configuration order (one
	// entry for a concurrency limit).
	Windows []Window `json:"windows"`
}

// Window is the state of one window of a limit for one client.
type Window struct {
	// Rate is the window's rate ("100/1m0s"); "" for a concurrency limit.
	Rate string `json:"rate,omitempty"`
	// Limit is the window's capacity (the limit, the burst, or max_in_flight).
	Limit int64 `json:"limit"`
	// WindowSeconds is the window's length in seconds (0 for concurrency).
	WindowSeconds float64 `json:"window_seconds,omitempty"`
	// Used is the number of units counted now.
	Used int64 `json:"used"`
	// Remaining is the capacity left.
	Remaining int64 `json:"remaining"`
	// ResetSeconds is how long until Remaining next increases.
	ResetSeconds float64 `json:"reset_seconds"`
}

func (h *handler) usage(w http.ResponseWriter, r *http.Request) {
	l, key, ok := h.target(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	ws, err := h.o.Store.Usage(ctx, h.o.Now(), l, key)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	u := Usage{Limit: l.Name, Algorithm: l.Algorithm.String(), Mode: "enforce", CounterKey: key, Windows: make([]Window, 0, len(ws))}
	if l.Shadow {
		u.Mode = "shadow"
	}
	for i, wu := range ws {
		win := Window{Used: wu.Used, Remaining: wu.Remaining, ResetSeconds: wu.Reset.Seconds()}
		if l.Algorithm == ratelimit.Concurrency {
			win.Limit = l.MaxInFlight
		} else {
			win.Rate = wu.Rate.String()
			win.WindowSeconds = wu.Rate.Window.Seconds()
			if i < len(l.Rates) {
				win.Limit = l.Capacity(i)
			} else {
				win.Limit = wu.Rate.Limit
			}
		}
		u.Windows = append(u.Windows, win)
	}
	writeJSON(w, http.StatusOK, u)
}

func (h *handler) reset(w http.ResponseWriter, r *http.Request) {
	l, key, ok := h.target(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	if err := h.o.Store.Reset(ctx, l, key); err != nil {
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	h.o.Logger.Info("admin: counters reset", "limit", l.Name, "counter_key", key)
	writeJSON(w, http.StatusOK, map[string]any{"reset": true, "limit": l.Name, "counter_key": key})
}

func (h *handler) reload(w http.ResponseWriter) {
	if h.o.Reload == nil {
		problem(w, http.StatusNotImplemented, "reload not available")
		return
	}
	if err := h.o.Reload(); err != nil {
		problem(w, http.StatusUnprocessableEntity, "reload rejected; the previous configuration keeps serving: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reloaded": true})
}

// Redact returns v as generic JSON (maps, slices, values) with secrets
// replaced by "REDACTED": the value of every key whose name contains
// "password", "secret" or "token" (except names ending in "_env" or
// "_file", which name where a secret lives rather than hold it), and the
// password of every URL with user info.
func Redact(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	return redact(g), nil
}

const redacted = "REDACTED"

func redact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if secretName(k) {
				if s, ok := e.(string); !ok || s != "" {
					x[k] = redacted
				}
				continue
			}
			x[k] = redact(e)
		}
	case []any:
		for i, e := range x {
			x[i] = redact(e)
		}
	case string:
		return redactURL(x)
	}
	return v
}

func secretName(k string) bool {
	k = strings.ToLower(k)
	if strings.HasSuffix(k, "_env") || strings.HasSuffix(k, "env") || strings.HasSuffix(k, "_file") || strings.HasSuffix(k, "file") {
		return false
	}
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token")
}

// redactURL hides the password of a URL with user info.
func redactURL(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redacted)
		return u.String()
	}
	return s
}
