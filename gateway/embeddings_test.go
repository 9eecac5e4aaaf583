package gateway

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// lenEmbedder embeds a text as [len, vowels, 1]: enough to tell inputs apart.
type lenEmbedder struct{}

func (lenEmbedder) Dim() int     { return 3 }
func (lenEmbedder) Name() string { return "len-embedder" }
func (lenEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{float32(len(t)), float32(strings.Count(t, "a") + strings.Count(t, "e")), 1}
	}
	return out, nil
}

func TestEmbeddings(t *testing.T) {
	e := newEnv(t, func(_ *Config, d *Deps) { d.Embedder = lenEmbedder{} })
	resp, b := e.post("/v1/embeddings", keyA, map[string]any{"model": "citizen", "input": []string{"abc", "eeee e"}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var out struct {
		Object string
		Model  string
		Data   []struct {
			Object    string
			Index     int
			Embedding []float32
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	decodeJSON(t, b, &out)
	if out.Object != "list" || out.Model != "len-embedder" || len(out.Data) != 2 || out.Data[1].Index != 1 || out.Data[1].Object != "embedding" ||
		out.Data[1].Embedding[0] != 6 || out.Data[1].Embedding[1] != 5 || out.Usage.PromptTokens != 3 || out.Usage.TotalTokens != 3 {
		t.Fatalf("embeddings: %s", b)
	}
	// base64: little-endian float32, as the SDKs decode it.
	_, b = e.post("/v1/embeddings", keyA, map[string]any{"model": "len-embedder", "input": "abc", "encoding_format": "base64"})
	var b64 struct{ Data []struct{ Embedding string } }
	decodeJSON(t, b, &b64)
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 12 || math.Float32frombits(binary.LittleEndian.Uint32(raw)) != 3 {
		t.Fatalf("base64: %s (%v)", b, err)
	}
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"model":"citizen"}`, 400},
		{`{"input":"x"}`, 400},
		{`{"model":"citizen","input":""}`, 400},
		{`{"model":"citizen","input":[]}`, 400},
		{`{"model":"citizen","input":[[1,2]]}`, 400},
		{`{"model":"citizen","input":"x","encoding_format":"hex"}`, 400},
		{`{"model":"citizen","input":"x","dimensions":2}`, 400},
		{`{"model":"citizen","input":"x","extra":1}`, 400},
		{`{"model":"other","input":"x"}`, 404},
	} {
		resp, b := e.post("/v1/embeddings", keyA, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
			continue
		}
		apiErrOf(t, b)
	}
	if resp, _ := e.post("/v1/embeddings", "", `{"model":"citizen","input":"x"}`); resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	if n := len(e.interactions()); n != 0 {
		t.Fatalf("embeddings recorded %d interactions", n)
	}
}

func TestEmbeddingsUnavailable(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.post("/v1/embeddings", keyA, `{"model":"citizen","input":"x"}`)
	if resp.StatusCode != 400 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if got := apiErrOf(t, b); got.Code == nil || *got.Code != "embeddings_unavailable" {
		t.Fatalf("error: %s", b)
	}
}

func FuzzDecodeEmbeddings(f *testing.F) {
	for _, s := range []string{`{"model":"citizen","input":"x"}`, `{"model":"m","input":["a","b"],"encoding_format":"base64"}`, `{"input":[[1]]}`, `{}`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, texts, err := decodeEmbeddings(b)
		if err != nil {
			if err.Status != 400 || err.Message == "" || r != nil {
				t.Fatalf("%q: %+v", b, err)
			}
			return
		}
		if len(texts) == 0 || len(texts) > maxEmbeddingInputs || r.Model == "" {
			t.Fatalf("%q accepted: %d inputs", b, len(texts))
		}
	})
}

// TestMetricsConventions: after chat, responses and embeddings requests
// the registry has the OpenTelemetry GenAI and vLLM-style names with their
// required labels, and promlint finds nothing.
func TestMetricsConventions(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(_ *Config, d *Deps) { d.Registry = reg; d.Embedder = lenEmbedder{} })
	complete(t, e, keyA, map[string]any{"model": "citizen@v2"})
	e.post("/v1/responses", keyA, map[string]any{"model": "citizen", "input": "hello"})
	e.post("/v1/embeddings", keyA, map[string]any{"model": "citizen", "input": "a b"})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	labels := map[string]map[string]bool{}
	for _, mf := range mfs {
		labels[mf.GetName()] = map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[mf.GetName()][l.GetName()+"="+l.GetValue()] = true
			}
		}
	}
	required := []string{"gen_ai_operation_name=chat", "gen_ai_provider_name=citizen", "gen_ai_request_model=citizen@v2", "gen_ai_response_model=citizen@v2"}
	for name, want := range map[string][]string{
		"gen_ai_server_request_duration_seconds":        append(required, "error_type=", "gen_ai_operation_name=embeddings", "gen_ai_response_model=len-embedder"),
		"gen_ai_server_time_to_first_token_seconds":     required,
		"gen_ai_server_time_per_output_token_seconds":   append(required, "gen_ai_request_model=citizen", "gen_ai_response_model=citizen@v1"),
		"gen_ai_client_token_usage":                     append(required, "gen_ai_token_type=input", "gen_ai_token_type=output"),
		"citizen_num_requests_running":                  {"model_name=citizen"},
		"citizen_time_to_first_token_seconds":           {"model_name=citizen"},
		"citizen_request_time_per_output_token_seconds": {"model_name=citizen"},
		"citizen_e2e_request_latency_seconds":           {"model_name=citizen"},
		"citizen_prompt_tokens_total":                   {"model_name=citizen"},
		"citizen_generation_tokens_total":               {"model_name=citizen"},
	} {
		got, ok := labels[name]
		if !ok {
			t.Errorf("no metric %s", name)
			continue
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%s lacks %s (has %v)", name, w, got)
			}
		}
	}
}
