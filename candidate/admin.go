package candidate

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// MaxBody is the largest candidate configuration POST /admin/candidate
// reads.
const MaxBody = 1 << 20

// ServeHTTP serves the candidate endpoints (behind the admin token):
//
//	GET    /admin/candidate          the running candidate's record (404 without one)
//	POST   /admin/candidate          a TOML body becomes the candidate (validated like a reload)
//	DELETE /admin/candidate          remove the candidate
//	POST   /admin/candidate/promote  make the candidate live, as a reload would
func (m *Manager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/admin/candidate" && r.Method == http.MethodGet:
		rep, err := m.Report()
		if err != nil {
			problem(w, http.StatusNotFound, err.Error(), nil)
			return
		}
		writeJSON(w, http.StatusOK, rep)
	case r.URL.Path == "/admin/candidate" && r.Method == http.MethodPost:
		m.post(w, r)
	case r.URL.Path == "/admin/candidate" && r.Method == http.MethodDelete:
		if !m.Stop() {
			problem(w, http.StatusNotFound, ErrNone.Error(), nil)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/admin/candidate/promote" && r.Method == http.MethodPost:
		rep, err := m.Promote()
		switch {
		case errors.Is(err, ErrNone):
			problem(w, http.StatusNotFound, err.Error(), nil)
		case err != nil:
			problem(w, http.StatusConflict, "promotion rejected; the live configuration is unchanged: "+err.Error(), nil)
		default:
			writeJSON(w, http.StatusOK, map[string]any{"promoted": true, "report": rep})
		}
	case r.URL.Path == "/admin/candidate" || r.URL.Path == "/admin/candidate/promote":
		allow := "GET, POST, DELETE"
		if strings.HasSuffix(r.URL.Path, "/promote") {
			allow = "POST"
		}
		w.Header().Set("Allow", allow)
		problem(w, http.StatusMethodNotAllowed, "method not allowed", nil)
	default:
		problem(w, http.StatusNotFound, "no such candidate endpoint", nil)
	}
}

// post installs the body as the candidate.
func (m *Manager) post(w http.ResponseWriter, r *http.Request) {
	if m.o.Compile == nil {
		problem(w, http.StatusNotImplemented, "this gateway cannot compile a posted configuration", nil)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			problem(w, http.StatusRequestEntityTooLarge, "a candidate configuration is at most 1 MiB", nil)
			return
		}
		problem(w, http.StatusBadRequest, "reading the body: "+err.Error(), nil)
		return
	}
	p, err := m.o.Compile(data)
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid candidate configuration; nothing changed", lines(err))
		return
	}
	if err := m.Start(p, "admin"); err != nil {
		problem(w, http.StatusInternalServerError, "cannot start the candidate: "+err.Error(), nil)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"candidate": true, "routes": len(p.Routes), "limits": len(p.Limits)})
}

// lines splits a joined error into one problem a line.
func lines(err error) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func problem(w http.ResponseWriter, status int, detail string, problems []string) {
	body := map[string]any{"title": http.StatusText(status), "status": status, "detail": detail}
	if problems != nil {
		body["problems"] = problems
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
