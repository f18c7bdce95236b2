package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// MaxOverrideBody bounds the body of PUT /admin/overrides.
const MaxOverrideBody = 16 << 10

// OverrideSync is this gateway's copy of the store's override table.
type OverrideSync interface {
	// For returns the table compiled against p.
	For(p *policy.Policy) *override.Table
	// Refresh reads the table now, so that a change made through this
	// gateway applies here at once.
	Refresh(ctx context.Context) error
}

// overrideBody is the JSON body of PUT /admin/overrides.
type overrideBody struct {
	Limit       string   `json:"limit"`
	Consumer    string   `json:"consumer"`
	Key         string   `json:"key"`
	Rates       []string `json:"rates"`
	Burst       int64    `json:"burst"`
	MaxInFlight int64    `json:"max_in_flight"`
	Expires     string   `json:"expires"`
	Reason      string   `json:"reason"`
}

// OverrideView is one override as GET and PUT /admin/overrides show it.
type OverrideView struct {
	// Limit is the limit's name.
	Limit string `json:"limit"`
	// Consumer is the consumer it applies to ("" when Key is set).
	Consumer string `json:"consumer,omitempty"`
	// Key names the client it applies to, without secrets: "ip:A",
	// "user:U", or "api_key:sha256:" and the first 16 hex digits of the
	// key's SHA-256.
	Key string `json:"key,omitempty"`
	// Subject is what DELETE ?subject= takes.
	Subject string `json:"subject"`
	// Rates, Burst and MaxInFlight are the numbers it gives.
	Rates       []string `json:"rates,omitempty"`
	Burst       int64    `json:"burst,omitempty"`
	MaxInFlight int64    `json:"max_in_flight,omitempty"`
	// Expires and Created are RFC 3339 instants.
	Expires string `json:"expires"`
	Created string `json:"created"`
	// Reason is the operator's note.
	Reason string `json:"reason,omitempty"`
	// InForce reports whether it applies now: not expired, and fitting the
	// configured limit (else Problem says why not).
	InForce bool   `json:"in_force"`
	Problem string `json:"problem,omitempty"`
}

func viewOf(o ratelimit.Override, problem string, now time.Time) OverrideView {
	v := OverrideView{Limit: o.Limit, Subject: o.Subject, Burst: o.Burst, MaxInFlight: o.MaxInFlight,
		Expires: o.Expires.UTC().Format(time.RFC3339Nano), Created: o.Created.UTC().Format(time.RFC3339Nano),
		Reason: o.Reason, Problem: problem}
	if name, ok := strings.CutPrefix(o.Subject, "consumer:"); ok {
		v.Consumer = name
	} else {
		v.Key = o.Label
	}
	for _, r := range o.Rates {
		v.Rates = append(v.Rates, r.String())
	}
	if problem == "" && !now.Before(o.Expires) {
		v.Problem = "expired"
	}
	v.InForce = v.Problem == ""
	return v
}

// fieldProblem is a 400 or 422 problem naming the fields at fault.
type fieldProblem struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail"`
	Errors []policy.FieldError `json:"errors"`
}

func writeFieldProblem(w http.ResponseWriter, status int, errs []policy.FieldError) {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	body, _ := json.Marshal(fieldProblem{Type: "about:blank", Title: http.StatusText(status), Status: status,
		Detail: strings.Join(msgs, "; "), Errors: errs})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// overrides serves /admin/overrides.
func (h *handler) overrides(w http.ResponseWriter, r *http.Request) {
	if h.o.Overrides == nil || h.o.Policy == nil {
		problem(w, http.StatusNotImplemented, "overrides are not available")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	switch r.Method {
	case http.MethodPut:
		h.putOverride(ctx, w, r)
	case http.MethodDelete:
		h.deleteOverride(ctx, w, r)
	default:
		h.listOverrides(ctx, w)
	}
}

func (h *handler) listOverrides(ctx context.Context, w http.ResponseWriter) {
	_, list, err := h.o.Overrides.Overrides(ctx, 0)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	now := h.o.Now()
	compiled := override.Compile(h.o.Policy(), list)
	views := make([]OverrideView, 0, len(list))
	for _, st := range compiled.All {
		views = append(views, viewOf(st.Override, st.Problem, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"overrides": views, "max": h.o.MaxOverrides})
}

// decodeOverride reads the body strictly: at most MaxOverrideBody bytes,
// one JSON object, no unknown field. A problem is answered 400 (413 for
// a body too large) naming the field where it can.
func decodeOverride(w http.ResponseWriter, r *http.Request) (overrideBody, bool) {
	var b overrideBody
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxOverrideBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		problem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: larger than %d bytes", MaxOverrideBody))
		return b, false
	}
	if err != nil {
		problem(w, http.StatusBadRequest, "body: "+err.Error())
		return b, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&b)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil && bytes.TrimSpace(data)[0] != '{' {
		err = errors.New("want a JSON object")
	}
	if err != nil {
		field := "body"
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field != "":
			field = te.Field
			err = fmt.Errorf("want %s, got JSON %s", te.Type, te.Value)
		case errors.As(err, &se):
			err = fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field = strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			err = errors.New("unknown field")
		}
		writeFieldProblem(w, http.StatusBadRequest, []policy.FieldError{{Field: field, Message: err.Error()}})
		return b, false
	}
	return b, true
}

func (h *handler) putOverride(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	b, ok := decodeOverride(w, r)
	if !ok {
		return
	}
	now := h.o.Now()
	o, errs := h.checkOverride(b, now)
	if len(errs) > 0 {
		writeFieldProblem(w, http.StatusUnprocessableEntity, errs)
		return
	}
	err := h.o.Overrides.PutOverride(ctx, now, o, h.o.MaxOverrides)
	switch {
	case errors.Is(err, ratelimit.ErrTooManyOverrides):
		problem(w, http.StatusConflict, fmt.Sprintf("the override table already holds %d overrides, the most it may; delete some first", h.o.MaxOverrides))
		return
	case err != nil:
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	h.o.Logger.Info("admin: override set", "limit", o.Limit, "subject", o.Label, "rates", b.Rates,
		"max_in_flight", o.MaxInFlight, "expires", o.Expires, "reason", o.Reason)
	h.refreshOverrides(ctx)
	writeJSON(w, http.StatusOK, viewOf(o, "", now))
}

// checkOverride turns the body into the override to store, or returns
// every problem, each naming its field.
func (h *handler) checkOverride(b overrideBody, now time.Time) (ratelimit.Override, []policy.FieldError) {
	var errs []policy.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, policy.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	p := h.o.Policy()
	o := ratelimit.Override{Created: now, Reason: b.Reason}
	l := p.Limit(b.Limit)
	switch {
	case b.Limit == "":
		add("limit", "is required")
	case l == nil:
		add("limit", "unknown limit %q", headersSafe(b.Limit))
	default:
		o.Limit, o.Scope = l.Name, l.Scope
	}
	switch {
	case b.Consumer != "" && b.Key != "":
		add("key", "give consumer or key, not both")
	case b.Consumer == "" && b.Key == "":
		add("consumer", "give consumer (a consumer's name) or key (api_key:K, user:U or ip:A)")
	case b.Consumer != "":
		switch {
		case !validConsumer(b.Consumer):
			add("consumer", "invalid consumer name %q (1..64 letters, digits, '-' and '_')", headersSafe(b.Consumer))
		case !p.Consumers.Enabled():
			add("consumer", "no [consumers] registry is configured; name the client by key")
		case p.Consumers.Registry.ByName(b.Consumer) == nil:
			add("consumer", "no consumer named %q is registered", b.Consumer)
		default:
			o.Subject, o.Label = policy.ConsumerSubject(b.Consumer), "consumer:"+b.Consumer
		}
	default:
		id, err := parseClient(b.Key)
		if err == nil {
			// A consumer's key names the consumer, as its requests are
			// counted; a key no consumer owns is never counted under.
			err = withConsumer(p, b.Key, &id)
		}
		switch {
		case err != nil:
			add("key", "%s", strings.TrimPrefix(err.Error(), "key: "))
		case len(id.Client) > p.Identity.MaxValueLen():
			add("key", "longer than identity.max_value_len (%d): no request has that identity", p.Identity.MaxValueLen())
		case l != nil:
			subject, err := p.OverrideSubject(l, &id)
			if err != nil {
				add("key", "%v", err)
				break
			}
			o.Subject, o.Label = subject, label(&id)
		}
	}
	if l != nil {
		v, ferrs := l.OverrideLimit(policy.OverrideNumbers{Rates: b.Rates, Burst: b.Burst, MaxInFlight: b.MaxInFlight})
		errs = append(errs, ferrs...)
		if v != nil {
			o.Rates, o.Burst, o.MaxInFlight = v.Rates, v.Burst, v.MaxInFlight
		}
	}
	exp, err := time.Parse(time.RFC3339Nano, b.Expires)
	switch {
	case b.Expires == "":
		add("expires", "is required: an RFC 3339 instant such as 2026-12-31T23:59:59Z (a permanent deal belongs in the configuration)")
	case err != nil:
		add("expires", "%q is not an RFC 3339 instant such as 2026-12-31T23:59:59Z", headersSafe(b.Expires))
	case !exp.After(now):
		add("expires", "%s is not in the future", exp.UTC().Format(time.RFC3339))
	case exp.Sub(now) > policy.MaxOverrideTTL:
		add("expires", "%s is more than 366 days ahead", exp.UTC().Format(time.RFC3339))
	default:
		// Stores keep microseconds.
		o.Expires = exp.Truncate(time.Microsecond)
	}
	if len(b.Reason) > policy.MaxReasonLen {
		add("reason", "longer than %d bytes", policy.MaxReasonLen)
	}
	return o, errs
}

// label names the client of id without a secret.
func label(id *keys.Identity) string {
	switch id.ClientKind {
	case keys.SourceAPIKey:
		sum := sha256.Sum256([]byte(id.APIKey))
		return "api_key:sha256:" + hex.EncodeToString(sum[:8])
	case keys.SourceConsumer:
		// Named by one of its keys, counted as the consumer.
		sum := sha256.Sum256([]byte(id.APIKey))
		return "api_key:sha256:" + hex.EncodeToString(sum[:8]) + " (consumer " + id.Client + ")"
	case keys.SourceUser:
		return "user:" + id.User
	case keys.SourceMTLS:
		return "mtls:" + id.MTLS
	default:
		return "ip:" + id.IP.String()
	}
}

func validConsumer(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// headersSafe bounds a client-given value echoed in an answer.
func headersSafe(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}

func (h *handler) deleteOverride(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("limit")
	if name == "" {
		problem(w, http.StatusBadRequest, "query parameter \"limit\" is required")
		return
	}
	var subject string
	switch {
	case q.Get("subject") != "":
		subject = q.Get("subject")
	case q.Get("consumer") != "":
		subject = policy.ConsumerSubject(q.Get("consumer"))
	case q.Get("key") != "":
		p := h.o.Policy()
		l := p.Limit(name)
		if l == nil {
			problem(w, http.StatusNotFound, fmt.Sprintf("limit %q: not found; name the override by subject= (GET /admin/overrides shows it)", headersSafe(name)))
			return
		}
		id, err := parseClient(q.Get("key"))
		if err == nil {
			err = withConsumer(p, q.Get("key"), &id)
		}
		if err == nil {
			subject, err = p.OverrideSubject(l, &id)
		}
		if err != nil {
			problem(w, http.StatusBadRequest, err.Error())
			return
		}
	default:
		problem(w, http.StatusBadRequest, "give consumer=NAME, key=api_key:K|user:U|ip:A or subject=S")
		return
	}
	found, err := h.o.Overrides.DeleteOverride(ctx, name, subject)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	if !found {
		problem(w, http.StatusNotFound, "no override of limit "+fmt.Sprintf("%q", headersSafe(name))+" for that subject")
		return
	}
	h.o.Logger.Info("admin: override deleted", "limit", name, "subject", subject)
	h.refreshOverrides(ctx)
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "limit": name, "subject": subject})
}

func (h *handler) refreshOverrides(ctx context.Context) {
	if h.o.OverrideSync == nil {
		return
	}
	if err := h.o.OverrideSync.Refresh(ctx); err != nil {
		h.o.Logger.Warn("admin: reading the override table back failed; the change applies within a second", "err", err)
	}
}

// activeOverride returns the override in force for the limit and client
// a /admin/limits query names, or nil.
func (h *handler) activeOverride(q url.Values) *override.Compiled {
	if h.o.OverrideSync == nil {
		return nil
	}
	p := h.o.Policy()
	l := p.Limit(q.Get("limit"))
	lo := h.o.OverrideSync.For(p).For(l)
	if lo == nil {
		return nil
	}
	subject, consumer := "", ""
	if id, err := parseClient(q.Get("key")); err == nil {
		_ = withConsumer(p, q.Get("key"), &id)
		consumer = id.ConsumerName()
		if id.ClientKind != 0 {
			if s, err := p.OverrideSubject(l, &id); err == nil {
				subject = strings.TrimPrefix(s, "key:")
			}
		}
	}
	return lo.Find(h.o.Now(), consumer, subject)
}
