package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// Embedder turns texts into vectors of a fixed dimension for POST
// /v1/embeddings (the memory package's embedders satisfy it). Embed returns
// one vector per text, in order. Implementations are safe for concurrent
// use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
	// Name identifies the embedder; it is the "model" of the answer.
	Name() string
}

// TokenCounter is an optional ability of an Embedder: the number of tokens
// it reads of a text, reported as usage. Without it usage counts
// whitespace-separated words.
type TokenCounter interface {
	CountTokens(text string) int
}

// Embedding request limits (OpenAI's).
const (
	maxEmbeddingInputs = 2048
	maxEmbeddingChars  = 8192 * 8
)

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format,omitempty"`
	Dimensions     *int            `json:"dimensions,omitempty"`
	User           *string         `json:"user,omitempty"`
}

// decodeEmbeddings parses an embeddings body strictly. The input is a
// string or an array of 1 to 2048 non-empty strings; token arrays are
// refused (citizen's embedders read text).
func decodeEmbeddings(body []byte) (*embeddingsRequest, []string, *APIError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, badRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	if !utf8.Valid(body) {
		return nil, nil, badRequest("", "We could not parse the JSON body of your request: it is not valid UTF-8.")
	}
	var r embeddingsRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, nil, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, badRequest("", "We could not parse the JSON body of your request: trailing data after the JSON object.")
	}
	if r.Model == "" {
		return nil, nil, badRequest("model", "Missing required parameter: 'model'.")
	}
	if len(r.Input) == 0 || string(r.Input) == "null" {
		return nil, nil, badRequest("input", "Missing required parameter: 'input'.")
	}
	var texts []string
	var one string
	if err := json.Unmarshal(r.Input, &one); err == nil {
		texts = []string{one}
	} else if err := json.Unmarshal(r.Input, &texts); err != nil {
		var tokens []json.RawMessage
		if json.Unmarshal(r.Input, &tokens) == nil {
			return nil, nil, badRequest("input", "Invalid 'input': token arrays are not supported; send text.")
		}
		return nil, nil, badRequest("input", "Invalid 'input': expected a string or an array of strings.")
	}
	if len(texts) == 0 || len(texts) > maxEmbeddingInputs {
		return nil, nil, badRequest("input", fmt.Sprintf("Invalid 'input': expected between 1 and %d inputs, got %d.", maxEmbeddingInputs, len(texts)))
	}
	for i, t := range texts {
		if t == "" {
			return nil, nil, badRequest("input", fmt.Sprintf("Invalid 'input[%d]': the input must not be empty.", i))
		}
		if len(t) > maxEmbeddingChars {
			return nil, nil, badRequest("input", fmt.Sprintf("Invalid 'input[%d]': longer than %d bytes.", i, maxEmbeddingChars))
		}
	}
	if f := r.EncodingFormat; f != nil && *f != "float" && *f != "base64" {
		return nil, nil, badRequest("encoding_format", "Invalid 'encoding_format': expected 'float' or 'base64'.")
	}
	if r.User != nil && len(*r.User) > maxUserLen {
		return nil, nil, badRequest("user", fmt.Sprintf("Invalid 'user': string too long, at most %d characters.", maxUserLen))
	}
	return &r, texts, nil
}

type embeddingOut struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32
}

type embeddingsOut struct {
	Object string         `json:"object"`
	Data   []embeddingOut `json:"data"`
	Model  string         `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embedder is Deps.Embedder, or the engine when it can embed.
func (s *Server) embedder() Embedder {
	if s.deps.Embedder != nil {
		return s.deps.Embedder
	}
	if e, ok := s.engine.(Embedder); ok {
		return e
	}
	return nil
}

// embeddings serves POST /v1/embeddings. The model is "citizen" or the
// embedder's name; the answer names the embedder. Embeddings are not
// interactions and are not recorded.
func (s *Server) embeddings(c echo.Context) error {
	start := time.Now()
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 {
			s.bufs.Put(buf)
		}
	}()
	if e := s.readBody(c, buf); e != nil {
		return s.fail(c, e)
	}
	r, texts, e := decodeEmbeddings(buf.Bytes())
	if e != nil {
		return s.fail(c, e)
	}
	emb := s.embedder()
	if emb == nil {
		return s.fail(c, &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "embeddings_unavailable", Param: "model",
			Message: "This deployment cannot create embeddings: neither its engine nor a memory embedder serves them."})
	}
	name := emb.Name()
	if r.Model != ModelName && r.Model != name && !strings.HasPrefix(r.Model, ModelName+"@") {
		return s.fail(c, errModelNotFound(r.Model))
	}
	if r.Dimensions != nil && *r.Dimensions != emb.Dim() {
		return s.fail(c, badRequest("dimensions", fmt.Sprintf("Invalid 'dimensions': the model %s gives %d-dimensional embeddings.", name, emb.Dim())))
	}
	key := keyOf(c)
	rpm, tpm := s.limitsOf(key)
	if ok, wait, what := s.limiter.admit(key.ID, rpm, tpm); !ok {
		return s.fail(c, errRateLimited("Rate limit reached for "+what+" per minute on this API key. Please try again later.", wait))
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.RequestTimeout)
	defer cancel()
	vecs, err := emb.Embed(ctx, texts)
	if err == nil && len(vecs) != len(texts) {
		err = fmt.Errorf("gateway: the embedder returned %d vectors for %d inputs", len(vecs), len(texts))
	}
	if err != nil {
		if c.Request().Context().Err() != nil {
			return nil
		}
		s.log.Warn("embedding failed", "err", err)
		s.metrics.observeOperation(opEmbeddings, ModelName, name, errorType(http.StatusBadGateway), time.Since(start))
		return s.fail(c, &APIError{Status: http.StatusBadGateway, Type: "api_error", Message: "The embedder failed."})
	}
	out := embeddingsOut{Object: "list", Model: name, Data: make([]embeddingOut, len(vecs))}
	b64 := r.EncodingFormat != nil && *r.EncodingFormat == "base64"
	tokens := 0
	tc, counts := emb.(TokenCounter)
	for i, v := range vecs {
		d := embeddingOut{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			raw := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(x))
			}
			d.Embedding = base64.StdEncoding.EncodeToString(raw)
		}
		out.Data[i] = d
		if counts {
			tokens += tc.CountTokens(texts[i])
		} else {
			tokens += len(strings.Fields(texts[i]))
		}
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = tokens, tokens
	s.limiter.charge(key.ID, tpm, tokens)
	s.metrics.observeOperation(opEmbeddings, ModelName, name, "", time.Since(start))
	s.metrics.observeTokens(opEmbeddings, name, "input", tokens)
	return c.JSON(http.StatusOK, out)
}
