package reflection

import (
	"encoding/json"
	"net/http"
)

// ScoreboardHandler serves the scoreboard as JSON on GET:
// {"rows":[Row...]}, filtered by the optional query parameters type and
// version. Other methods get 405.
func ScoreboardHandler(sb *Scoreboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		rows := sb.Rows(q.Get("type"), q.Get("version"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(map[string]any{"rows": rows})
	})
}
