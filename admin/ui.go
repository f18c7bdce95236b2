package admin

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/topk"
)

// uiPage is the dashboard: one self-contained page (no external script,
// style or font), so that it works where the admin listener has no
// Internet access.
//
//go:embed ui/index.html
var uiPage []byte

// uiHistory is how many rate buckets the dashboard shows: 3 minutes.
const uiHistory = 18

// uiPageHandler serves the dashboard. The page holds no data: it asks for
// the admin token and sends it with every fetch, so it is served without
// one (a browser cannot send a bearer token on navigation).
func uiPageHandler(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Nothing but the page's own inline script and style, and fetches to
	// this listener.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(uiPage)
}

// uiLimit is one limit's row on the dashboard.
type uiLimit struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Shadow    bool   `json:"shadow"`
	// Distinct is what a distinct limit counts the distinct values of
	// (its `distinct` setting), "" for other limits.
	Distinct string `json:"distinct,omitempty"`
	// Totals since the gateway started: what /metrics reports per limit.
	Allowed      uint64 `json:"allowed"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
	Near         uint64 `json:"near"`
	// Rates are [allowed, denied, shadow-denied] per bucket, oldest first.
	Rates [][3]uint64 `json:"rates"`
	// Utilisation is the mean share of the window decisions found used
	// over the last minute, -1 when there were none.
	Utilisation float64 `json:"utilisation"`
	// What the limit is set to do beyond counting (limit_ui.go): its
	// mode, the share of keys it is enforced for when not all, its
	// expressions, its own answer's status and its jitter.
	Mode           string `json:"mode,omitempty"`
	EnforcePercent *int   `json:"enforce_percent,omitempty"`
	When           string `json:"when,omitempty"`
	Key            string `json:"key,omitempty"`
	CostExpr       string `json:"cost_expr,omitempty"`
	AnswerStatus   int    `json:"answer_status,omitempty"`
	Jitter         string `json:"retry_after_jitter,omitempty"`
}

// uiData is GET /admin/ui/data.
type uiData struct {
	Now           time.Time `json:"now"`
	BucketSeconds int       `json:"bucket_seconds"`
	Status        any       `json:"status"`
	StoreLatency  float64   `json:"store_latency_ms"`
	StoreCalls    uint64    `json:"store_calls"`
	StoreErrors   uint64    `json:"store_errors"`
	Limits        []uiLimit `json:"limits"`
	Top           *topk.Top `json:"top,omitempty"`
	// Adaptive are the adaptive_concurrency limiters (omitted: none).
	Adaptive []AdaptiveState `json:"adaptive,omitempty"`
}

// uiData answers GET /admin/ui/data[?top=NAME&span=1m|15m]: what the
// dashboard shows, in one small answer it polls.
func (h *handler) uiData(w http.ResponseWriter, r *http.Request) {
	if h.o.Top == nil || h.o.Policy == nil {
		problem(w, http.StatusNotImplemented, "the dashboard's figures are not tracked")
		return
	}
	now := h.o.Now()
	d := uiData{Now: now, BucketSeconds: int(topk.RateBucket / time.Second), Limits: []uiLimit{}}
	if h.o.Status != nil {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		d.Status = h.o.Status(ctx)
		cancel()
	}
	mean, calls, errs := h.o.Top.Store.Recent(now, 6)
	d.StoreLatency, d.StoreCalls, d.StoreErrors = float64(mean)/float64(time.Millisecond), calls, errs
	for _, l := range h.o.Policy().Limits {
		row := uiLimit{Name: l.Name, Algorithm: l.Algorithm.String(), Shadow: l.Shadow, Utilisation: -1}
		if l.Distinct != nil {
			row.Distinct = l.Distinct.String()
		} else if l.Exprs != nil && l.Exprs.Distinct != nil {
			row.Distinct = l.Exprs.Distinct.Text
		}
		if l.Adaptive != nil {
			row.Algorithm = policy.AlgorithmAdaptive
		}
		describeLimit(&row, l) // limit_ui.go
		if t := h.o.Top.Lookup(l.Name); t != nil {
			row.Allowed, row.Denied, row.ShadowDenied, row.Near = t.Allowed.Load(), t.Denied.Load(), t.ShadowDenied.Load(), t.Near.Load()
			row.Rates = t.Rates(now, uiHistory)
			row.Utilisation = t.Utilisation(now, 6)
		}
		d.Limits = append(d.Limits, row)
	}
	// The rate limit service's limits that have decided (a domain may
	// hold thousands that never do): those the tracker holds.
	for _, name := range h.o.Top.Names() {
		l := h.o.Policy().RLSLimit(name)
		t := h.o.Top.Lookup(name)
		if l == nil || t == nil {
			continue
		}
		d.Limits = append(d.Limits, uiLimit{Name: name, Algorithm: l.Algorithm.String(), Shadow: l.Shadow,
			Allowed: t.Allowed.Load(), Denied: t.Denied.Load(), ShadowDenied: t.ShadowDenied.Load(), Near: t.Near.Load(),
			Rates: t.Rates(now, uiHistory), Utilisation: t.Utilisation(now, 6)})
	}
	if h.o.Adaptive != nil {
		d.Adaptive = h.o.Adaptive()
	}
	if name := r.URL.Query().Get("top"); name != "" && (h.o.Policy().Limit(name) != nil || h.o.Policy().RLSLimit(name) != nil) {
		span := r.URL.Query().Get("span")
		if _, ok := topk.Spans[span]; !ok {
			span = "1m"
		}
		top := h.o.Top.Top(name, h.o.Top.Lookup(name), span, now, 10)
		d.Top = &top
	}
	// Compact: at 500 limits the indented form would triple the answer
	// polled every second.
	body, err := json.Marshal(d)
	if err != nil {
		problem(w, http.StatusInternalServerError, "encoding the response failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}
