package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"citizen/memory"
)

func TestUpstreamEmbedder(t *testing.T) {
	dims := 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"no"}}`, 401)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		type d struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out []d
		for i := len(req.Input) - 1; i >= 0; i-- { // out of order on purpose
			v := make([]float32, dims)
			v[0] = float32(len(req.Input[i]))
			out = append(out, d{i, v})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": out})
	}))
	defer srv.Close()
	e := &memory.UpstreamEmbedder{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m", Dims: 3}
	vs, err := e.Embed(context.Background(), []string{"a", "abc"})
	if err != nil || vs[0][0] != 1 || vs[1][0] != 3 {
		t.Fatalf("%v %v", vs, err)
	}
	dims = 4
	if _, err := e.Embed(context.Background(), []string{"a"}); !errors.Is(err, memory.ErrDimension) {
		t.Fatalf("dimension mismatch: %v", err)
	}
	e.APIKey = "bad"
	if _, err := e.Embed(context.Background(), []string{"a"}); err == nil {
		t.Fatal("401 accepted")
	}
}
