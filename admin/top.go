package admin

import (
	"net/http"
	"strconv"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/topk"
)

// top answers GET /admin/top?limit=NAME[&span=1m|15m][&n=N]: the clients
// of the limit most often denied and most often near it, with each count's
// error bound.
func (h *handler) top(w http.ResponseWriter, r *http.Request) {
	if h.o.Top == nil {
		problem(w, http.StatusNotImplemented, "top clients are not tracked")
		return
	}
	q := r.URL.Query()
	name := q.Get("limit")
	if name == "" {
		problem(w, http.StatusBadRequest, "query parameter limit is required")
		return
	}
	if h.o.Policy == nil || h.o.Policy().Limit(name) == nil && h.o.Policy().RLSLimit(name) == nil {
		problem(w, http.StatusNotFound, "no limit "+strconv.Quote(headers.Sanitize(name)))
		return
	}
	span := q.Get("span")
	if span == "" {
		span = "1m"
	}
	if _, ok := topk.Spans[span]; !ok {
		problem(w, http.StatusBadRequest, "span must be 1m or 15m, got "+strconv.Quote(headers.Sanitize(span)))
		return
	}
	n := 0
	if s := q.Get("n"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			problem(w, http.StatusBadRequest, "n must be a positive integer")
			return
		}
	}
	writeJSON(w, http.StatusOK, h.o.Top.Top(name, h.o.Top.Lookup(name), span, h.o.Now(), n))
}
