package memory

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// FailureModesHandler serves GET /v1/ops/failure-modes: the mined failure
// modes as JSON {"object":"list","data":[FailureMode...]}. Query: type,
// min_size, similarity. tenant returns the caller's tenant ("" = every
// tenant, for operators); the caller authenticates the request.
func FailureModesHandler(fl *FailureLog, tenant func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		opts := MineOptions{Type: q.Get("type"), Tenant: tenant(r)}
		bad := func(param, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": param, "code": nil}})
		}
		if s := q.Get("min_size"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				bad("min_size", "min_size must be a positive integer")
				return
			}
			opts.MinSize = n
		}
		if s := q.Get("similarity"); s != "" {
			f, err := strconv.ParseFloat(s, 32)
			if err != nil || !(f > 0 && f <= 1) { // NaN fails both comparisons
				bad("similarity", "similarity must be in (0, 1]")
				return
			}
			opts.Similarity = float32(f)
		}
		modes := fl.Mine(opts)
		if modes == nil {
			modes = []FailureMode{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": modes})
	})
}
