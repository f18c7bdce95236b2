// Package admin is Tollgate's admin API, served on the admin listener only:
//
//	GET    /admin/config                    the active configuration, secrets redacted
//	GET    /admin/limits?limit=NAME&key=K   usage of a limit for a client, per window
//	DELETE /admin/limits?limit=NAME&key=K   reset that client's counters of the limit
//	GET    /admin/overrides                 every override of a limit's numbers, with its expiry
//	PUT    /admin/overrides                 set one (JSON body)
//	DELETE /admin/overrides?limit=NAME&...  remove one
//	POST   /admin/reload                    reload the configuration
//	GET    /admin/top?limit=NAME&span=1m    the clients most often denied or near the limit
//	GET    /admin/ui                        the live dashboard (a page; it asks for the token)
//	GET    /admin/ui/data                   the figures the dashboard polls
//
// K is the client as the operator knows it (an API key, a user, an IP);
// the admin API turns it into the limit's counter key exactly as the live
// path builds it.
// Errors are RFC 9457 problem bodies. With a token set, every route needs
// "Authorization: Bearer <token>", but the dashboard's page, which holds
// no data. Guard, in front of everything the admin listener serves,
// refuses foreign Host names, cross-site writes and write bodies of the
// types a browser sends to any site.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/topk"
)

// ErrNotFound is the error (wrapped) of an unknown limit or consumer; the
// API answers 404. Any other error finding a counter answers 400.
var ErrNotFound = errors.New("not found")

// Options configures Handler. Store and Policy are required for the
// /admin/limits routes, Config for /admin/config, Reload for
// /admin/reload; a route whose callback is nil answers 501.
type Options struct {
	// Config returns the active configuration, encoded as JSON. Its
	// secrets must be of types that marshal redacted (policy.Secret,
	// config.SecretURL): the type, not a field's name, hides a value.
	Config func() any
	// Store holds the counters.
	Store ratelimit.Store
	// Policy returns the active policy, in which limits are looked up and
	// counter keys built.
	Policy func() *policy.Policy
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
	// Overrides is the store's override table, for /admin/overrides; nil
	// answers 501 there.
	Overrides ratelimit.OverrideTable
	// OverrideSync is this gateway's copy of the table: /admin/limits shows
	// the override in force, and a change made here is read back at once.
	// Nil shows none.
	OverrideSync OverrideSync
	// MaxOverrides bounds the override table. Default policy.MaxOverrides.
	MaxOverrides int
	// Top tracks the clients denied or near each limit, for /admin/top;
	// nil answers 501 there.
	Top *topk.Tracker
	// Status returns the gateway's state for the dashboard (config
	// version, last reload, store health), encoded as JSON; nil shows none.
	Status func(ctx context.Context) any
	// Upstreams returns the routes' upstream targets and their health,
	// encoded as JSON for /admin/upstreams; nil answers 501 there.
	Upstreams func() any
	// Adaptive returns the state of this gateway's adaptive_concurrency
	// limiters, for /admin/limits and the dashboard; nil shows none.
	Adaptive func() []AdaptiveState
}

type handler struct {
	o Options
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
	if o.MaxOverrides <= 0 {
		o.MaxOverrides = policy.MaxOverrides
	}
	h := &handler{o: o}
	var inner http.Handler = h
	if o.Token != "" {
		inner = RequireToken(o.Token, h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/admin/ui" {
			uiPageHandler(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})
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
		if allow(w, r, http.MethodGet, http.MethodHead, http.MethodDelete) {
			h.limits(w, r)
		}
	case "/admin/overrides":
		if allow(w, r, http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete) {
			h.overrides(w, r)
		}
	case "/admin/top":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			h.top(w, r)
		}
	case "/admin/ui/data":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			h.uiData(w, r)
		}
	case "/admin/upstreams":
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		if h.o.Upstreams == nil {
			problem(w, http.StatusNotImplemented, "upstreams are not available")
			return
		}
		writeJSON(w, http.StatusOK, h.o.Upstreams())
	case "/admin/reload":
		if !allow(w, r, http.MethodPost) {
			return
		}
		h.reload(w)
	default:
		problem(w, http.StatusNotFound, "no admin route "+r.Method+" "+headers.Sanitize(r.URL.Path))
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
	problem(w, http.StatusMethodNotAllowed, "method "+headers.Sanitize(r.Method)+" not allowed on "+r.URL.Path)
	return false
}

func (h *handler) config(w http.ResponseWriter) {
	if h.o.Config == nil {
		problem(w, http.StatusNotImplemented, "configuration not available")
		return
	}
	writeJSON(w, http.StatusOK, h.o.Config())
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
