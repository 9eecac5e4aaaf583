// Package inference is citizen's inference tier: the embedded model served
// over HTTP in vLLM's dialect, so that gateways with model.engine=upstream
// (gateway.Upstream) use it as they would use a vLLM server. It records
// nothing; the gateways in front of it do.
//
// The dialect, as vLLM's OpenAI-compatible server speaks it:
//   - POST /v1/chat/completions and POST /v1/completions: "model" names
//     the base model (Config.ServedModelName) or a loaded adapter
//     (lora_name); an unknown name is a 404.
//     "return_token_ids": true adds "prompt_token_ids" (top level for chat,
//     per choice for completions) and per-choice "token_ids";
//     "return_tokens_as_token_ids": true writes every logprob token as
//     "token_id:<id>". Logprobs are those of the sampled tokens under the
//     behaviour policy, every sampled token included (the end-of-turn
//     token too). A stream sends the prompt's ids with the finish chunk,
//     where vLLM sends them with the first: gateway.Upstream reads them
//     from any chunk.
//   - GET /v1/models: the base model, then the loaded adapters with
//     "root" (lora_path) and "parent" (the base's name).
//   - POST /v1/load_lora_adapter {"lora_name", "lora_path"} and POST
//     /v1/unload_lora_adapter {"lora_name"}: 200 with a plain-text success
//     message; errors are JSON ({"error": {"message", "type", "param",
//     "code"}}): 400 for bad JSON, a missing field, a name already loaded
//     (unless "load_inplace": true) or weights that do not fit the base,
//     404 for a path without an adapter or an unknown name. A failed call
//     changes nothing.
//   - GET /health: 200 once serving.
//
// Adapters are PEFT directories (adapter_config.json,
// adapter_model.safetensors), the distiller's artifacts.
package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"citizen/gateway"
	"citizen/model"
	"citizen/model/chat"
)

// Engine is what the server needs of a model engine (gateway/embedded's
// Engine has it): chat generation over versions, adapters registered as
// versions, and the chat model for raw-prompt completions. Adapter
// versions are registered on the chat model's engine under their id.
type Engine interface {
	Generate(ctx context.Context, req *gateway.GenerateRequest, emit func(gateway.Delta) error) (*gateway.Result, error)
	AddVersion(id, parent string, a *model.Adapter) error
	RemoveVersion(id string)
	Chat() *chat.Model
}

// Config configures a Server.
type Config struct {
	// ServedModelName is the name the base model is requested by (vLLM's
	// --served-model-name). Required.
	ServedModelName string
	// BaseRoot is the base model's path, reported as its "root" in
	// /v1/models.
	BaseRoot string
	// APIKey, when set, is required as a bearer token on /v1 (vLLM's
	// --api-key).
	APIKey string
	// Load reads a PEFT adapter directory for the base model. Required.
	Load func(dir string) (*model.Adapter, error)
	// MaxBodyBytes bounds a request body (default 16 MiB).
	MaxBodyBytes int64
}

// Server serves an Engine in vLLM's dialect. Safe for concurrent use.
type Server struct {
	cfg Config
	eng Engine
	log *slog.Logger

	mu       sync.Mutex
	adapters map[string]adapterInfo // loaded, by lora_name
	loading  map[string]bool        // names being loaded now
}

type adapterInfo struct {
	path    string
	created time.Time
}

// New returns a server for eng.
func New(cfg Config, eng Engine, log *slog.Logger) (*Server, error) {
	if cfg.ServedModelName == "" || cfg.Load == nil || eng == nil {
		return nil, errors.New("inference: a served model name, an adapter loader and an engine are required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, eng: eng, log: log, adapters: map[string]adapterInfo{}, loading: map[string]bool{}}, nil
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("GET /v1/models", s.auth(s.models))
	mux.Handle("POST /v1/load_lora_adapter", s.auth(s.load))
	mux.Handle("POST /v1/unload_lora_adapter", s.auth(s.unload))
	mux.Handle("POST /v1/chat/completions", s.auth(s.chat))
	mux.Handle("POST /v1/completions", s.auth(s.completions))
	return mux
}

// Run serves on addr until ctx ends, then drains in-flight requests for at
// most drain.
func (s *Server) Run(ctx context.Context, addr string, drain time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("inference: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.log.Info("inference server listening", "addr", ln.Addr().String(), "model", s.cfg.ServedModelName)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("inference: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	return srv.Shutdown(sctx)
}

func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		h(w, r)
	})
}

// apiError is vLLM's error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	} `json:"error"`
}

func fail(w http.ResponseWriter, status int, typ, format string, args ...any) {
	var e apiError
	e.Error.Message, e.Error.Type, e.Error.Code = fmt.Sprintf(format, args...), typ, status
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeStrict reads one JSON object into v, refusing unknown fields.
func decodeStrict(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// modelCard is one entry of /v1/models.
type modelCard struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	Created     int64      `json:"created"`
	OwnedBy     string     `json:"owned_by"`
	Root        string     `json:"root"`
	Parent      *string    `json:"parent"`
	MaxModelLen *int       `json:"max_model_len,omitempty"`
	Permission  []struct{} `json:"permission"`
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	maxLen := s.eng.Chat().Engine.Model().Config.MaxPositionEmbeddings
	base := s.cfg.ServedModelName
	cards := []modelCard{{ID: base, Object: "model", Created: time.Now().Unix(), OwnedBy: "vllm", Root: s.cfg.BaseRoot,
		MaxModelLen: &maxLen, Permission: []struct{}{}}}
	s.mu.Lock()
	names := make([]string, 0, len(s.adapters))
	for n := range s.adapters {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return s.adapters[names[i]].created.Before(s.adapters[names[j]].created) })
	for _, n := range names {
		a := s.adapters[n]
		cards = append(cards, modelCard{ID: n, Object: "model", Created: a.created.Unix(), OwnedBy: "vllm", Root: a.path,
			Parent: &base, Permission: []struct{}{}})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": cards})
}

// Adapters returns the loaded adapters' names and paths.
func (s *Server) Adapters() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.adapters))
	for n, a := range s.adapters {
		out[n] = a.path
	}
	return out
}

// version maps a request's model name to the engine's version.
func (s *Server) version(name string) (string, bool) {
	if name == s.cfg.ServedModelName {
		return "base", true
	}
	s.mu.Lock()
	_, ok := s.adapters[name]
	s.mu.Unlock()
	return name, ok
}

func (s *Server) load(w http.ResponseWriter, r *http.Request) {
	var req struct {
		LoRAName    string `json:"lora_name"`
		LoRAPath    string `json:"lora_path"`
		LoadInplace bool   `json:"load_inplace"`
	}
	if err := decodeStrict(r, &req); err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "invalid request body: %v", err)
		return
	}
	if req.LoRAName == "" || req.LoRAPath == "" {
		fail(w, http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
		return
	}
	if req.LoRAName == s.cfg.ServedModelName || req.LoRAName == "base" {
		fail(w, http.StatusBadRequest, "InvalidUserInput", "The lora adapter name '%s' is the base model's.", req.LoRAName)
		return
	}
	s.mu.Lock()
	_, loaded := s.adapters[req.LoRAName]
	busy := s.loading[req.LoRAName]
	if !busy && (!loaded || req.LoadInplace) {
		s.loading[req.LoRAName] = true
	}
	s.mu.Unlock()
	switch {
	case busy:
		fail(w, http.StatusBadRequest, "InvalidUserInput", "The lora adapter '%s' is being loaded.", req.LoRAName)
		return
	case loaded && !req.LoadInplace:
		fail(w, http.StatusBadRequest, "InvalidUserInput", "The lora adapter '%s' has already been loaded.", req.LoRAName)
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.loading, req.LoRAName)
		s.mu.Unlock()
	}()
	if _, err := os.Stat(filepath.Join(req.LoRAPath, model.AdapterConfigFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fail(w, http.StatusNotFound, "NotFoundError", "No adapter found for %s", req.LoRAPath)
		} else {
			fail(w, http.StatusBadRequest, "BadRequestError", "cannot read the adapter at %s: %v", req.LoRAPath, err)
		}
		return
	}
	a, err := s.cfg.Load(req.LoRAPath)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "Loading lora %s failed: %v", req.LoRAName, err)
		return
	}
	if err := s.eng.AddVersion(req.LoRAName, "base", a); err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "Loading lora %s failed: %v", req.LoRAName, err)
		return
	}
	s.mu.Lock()
	s.adapters[req.LoRAName] = adapterInfo{path: req.LoRAPath, created: time.Now()}
	s.mu.Unlock()
	s.log.Info("loaded LoRA adapter", "name", req.LoRAName, "path", req.LoRAPath)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", req.LoRAName)
}

func (s *Server) unload(w http.ResponseWriter, r *http.Request) {
	var req struct {
		LoRAName  string `json:"lora_name"`
		LoRAIntID *int   `json:"lora_int_id"`
	}
	if err := decodeStrict(r, &req); err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "invalid request body: %v", err)
		return
	}
	if req.LoRAName == "" {
		fail(w, http.StatusBadRequest, "InvalidUserInput", "either 'lora_name' and 'lora_int_id' needs to be provided.")
		return
	}
	s.mu.Lock()
	_, ok := s.adapters[req.LoRAName]
	if ok && !s.loading[req.LoRAName] {
		delete(s.adapters, req.LoRAName)
	}
	busy := s.loading[req.LoRAName]
	s.mu.Unlock()
	switch {
	case !ok:
		fail(w, http.StatusNotFound, "NotFoundError", "The lora adapter '%s' cannot be found.", req.LoRAName)
		return
	case busy:
		fail(w, http.StatusBadRequest, "InvalidUserInput", "The lora adapter '%s' is being loaded.", req.LoRAName)
		return
	}
	s.eng.RemoveVersion(req.LoRAName)
	s.log.Info("unloaded LoRA adapter", "name", req.LoRAName)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", req.LoRAName)
}

// engineFailed answers a generation error.
func engineFailed(w http.ResponseWriter, err error) {
	var ee *gateway.EngineError
	switch {
	case errors.As(err, &ee) && ee.Status >= 400 && ee.Status < 500:
		typ := "BadRequestError"
		if ee.Status == http.StatusNotFound {
			typ = "NotFoundError"
		}
		fail(w, ee.Status, typ, "%s", ee.Message)
	case errors.Is(err, model.ErrRequest), errors.Is(err, chat.ErrPromptTooLong):
		fail(w, http.StatusBadRequest, "BadRequestError", "%v", err)
	default:
		fail(w, http.StatusInternalServerError, "InternalServerError", "%v", err)
	}
}

// tokenText is a logprob entry's token: its text, or "token_id:<id>".
func tokenText(id int, text string, asIDs bool) string {
	if asIDs {
		return fmt.Sprintf("token_id:%d", id)
	}
	return text
}

// byteList is a token's bytes as vLLM lists them.
func byteList(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}
