package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// UpstreamEmbedder calls an OpenAI-compatible POST /v1/embeddings.
type UpstreamEmbedder struct {
	BaseURL string // e.g. http://localhost:8000/v1
	APIKey  string
	Model   string
	Dims    int // the model's embedding size
	Client  *http.Client
}

func (u *UpstreamEmbedder) Dim() int     { return u.Dims }
func (u *UpstreamEmbedder) Name() string { return "upstream:" + u.Model }

// Embed implements Embedder.
func (u *UpstreamEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	body, _ := json.Marshal(map[string]any{"model": u.Model, "input": texts, "encoding_format": "float"})
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(u.BaseURL, "/")+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("memory: embeddings: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if u.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+u.APIKey)
	}
	c := u.Client
	if c == nil {
		c = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("memory: embeddings: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("memory: embeddings: status %d: %s", resp.StatusCode, truncateText(string(b), 200))
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("memory: embeddings: bad response: %w", err)
	}
	if len(out.Data) != len(texts) {
		return nil, fmt.Errorf("memory: embeddings: %d vectors for %d inputs", len(out.Data), len(texts))
	}
	vecs := make([][]float32, len(texts))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(texts) || vecs[d.Index] != nil {
			return nil, fmt.Errorf("memory: embeddings: bad index %d", d.Index)
		}
		if len(d.Embedding) != u.Dims {
			return nil, fmt.Errorf("%w: upstream returned %d, configured %d", ErrDimension, len(d.Embedding), u.Dims)
		}
		vecs[d.Index] = d.Embedding
	}
	return vecs, nil
}
