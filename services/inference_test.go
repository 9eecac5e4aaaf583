package services

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/internal/modules"
	"citizen/model"
	"citizen/model/chat"
)

// tap is a reverse proxy between the gateway and the inference server
// that keeps what passed: the adapter loads, and each chat completion's
// request and answer (answers are buffered whole, streams included).
type tap struct {
	mu    sync.Mutex
	loads []map[string]string
	chats []tapped
}

type tapped struct {
	req  map[string]any
	resp []byte
}

func (tp *tap) handler(t *testing.T, target string) http.Handler {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		out := rec.Body.Bytes()
		tp.mu.Lock()
		switch r.URL.Path {
		case "/v1/load_lora_adapter":
			var m map[string]string
			json.Unmarshal(body, &m)
			tp.loads = append(tp.loads, m)
		case "/v1/chat/completions":
			var m map[string]any
			json.Unmarshal(body, &m)
			tp.chats = append(tp.chats, tapped{req: m, resp: bytes.Clone(out)})
		}
		tp.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(out)
	})
}

func (tp *tap) lastChat() tapped {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.chats[len(tp.chats)-1]
}

// upstreamTokens reads the token ids, logprobs and prompt ids of choice 0
// from the inference server's answer (a JSON body or an SSE stream), as
// vLLM sends them.
func upstreamTokens(t *testing.T, body []byte) (prompt, ids []int, lps []float32) {
	t.Helper()
	type answer struct {
		PromptTokenIDs []int `json:"prompt_token_ids"`
		Choices        []struct {
			TokenIDs []int `json:"token_ids"`
			Logprobs *struct {
				Content []struct {
					Logprob float32 `json:"logprob"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	add := func(a answer) {
		if len(a.PromptTokenIDs) > 0 {
			prompt = a.PromptTokenIDs
		}
		for _, c := range a.Choices {
			ids = append(ids, c.TokenIDs...)
			if c.Logprobs != nil {
				for _, e := range c.Logprobs.Content {
					lps = append(lps, e.Logprob)
				}
			}
		}
	}
	if !bytes.HasPrefix(body, []byte("data:")) {
		var a answer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("upstream answer: %v: %s", err, body)
		}
		add(a)
		return
	}
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var a answer
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			t.Fatalf("upstream chunk: %v: %s", err, data)
		}
		add(a)
	}
	return
}

// installVersion writes a LoRA adapter for the tiny model with random
// weights (its answers differ from the base's) where the distiller keeps
// its artifacts, and returns the weights.trained that accepts it.
func installVersion(t *testing.T, dataDir, version string) (*events.WeightsTrained, string) {
	t.Helper()
	cm, err := chat.Open("../model/base", model.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	base := cm.Engine.Model().Config
	a, err := model.NewAdapter(version, base, model.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj", "o_proj"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 9))
	for i := range a.Params {
		a.Params[i] = float32(r.NormFloat64() * 0.3)
	}
	rel := "weights/" + version
	dir := filepath.Join(dataDir, "distill", rel)
	if _, err := a.SavePEFT(dir, "citizen-base-tiny"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, model.AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return &events.WeightsTrained{Version: version, Parent: "base", Accepted: true, Objective: "test",
		Artifact: &events.Artifact{Format: "peft-lora", Path: rel, SHA256: hex.EncodeToString(sum[:])}}, dir
}

func appendPayload(t *testing.T, st events.Store, stream string, p events.Payload) {
	t.Helper()
	ev, err := events.Encode(p, events.Meta{Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), stream, events.Any, ev); err != nil {
		t.Fatal(err)
	}
}

// TestInferenceTier runs the inference path as it would run in front of
// vLLM: `citizen serve --target=inference` serves the tiny model in vLLM's
// dialect, and a gateway with model.engine=upstream in front of it (a tap
// between them keeps what passed). A version the distiller accepts
// reaches the inference server through /v1/load_lora_adapter under its
// id, with its path under the shared directory; the gateway sends that
// version's requests, pinned or the canary's, with the version as the
// model name; the recorded interaction names the version, and its token
// ids and logprobs are exactly the inference server's, streamed or not,
// and differ from the base's.
func TestInferenceTier(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The inference server, through the command line.
	infAddr := freeAddr(t)
	infLogs := newSyncBuffer()
	infDone := make(chan int, 1)
	go func() {
		infDone <- serveMain(ctx, []string{"serve", "--target", "inference", "--inference.listen", infAddr, "--model.name", "tiny",
			"--data-dir", t.TempDir()}, Env{Stdout: io.Discard, Stderr: infLogs})
	}()
	defer func() {
		cancel()
		if rc := <-infDone; rc != 0 {
			t.Errorf("inference server exited %d:\n%s", rc, infLogs)
		}
	}()
	waitCond(t, ctx, 60*time.Second, "the inference server", func() bool {
		resp, err := http.Get("http://" + infAddr + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	tp := &tap{}
	proxy := httptest.NewServer(tp.handler(t, "http://"+infAddr))
	defer proxy.Close()

	// The gateway, on a store the test appends the distiller's and the
	// rollout controller's events to.
	dir := t.TempDir()
	gwAddr := freeAddr(t)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := ParseConfig(fs, []string{"--data-dir", dir, "--target", "gateway", "--gateway.listen", gwAddr,
		"--model.engine", "upstream", "--model.upstream-url", proxy.URL + "/v1", "--model.upstream-model", "tiny"},
		Env{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	logs := newSyncBuffer()
	app := &App{Config: cfg, Log: NewLogger(cfg.Log, logs)}
	mods := app.Modules()
	for i := range mods {
		if mods[i].Name == "store" {
			mods[i].Init = func(context.Context) (modules.Service, error) { app.Store = st; return nil, nil }
		}
	}
	gctx, gcancel := context.WithCancel(ctx)
	gwDone := make(chan error, 1)
	go func() { gwDone <- modules.New(app.Log, mods...).Run(gctx, cfg.Target, cfg.ShutdownTimeout) }()
	defer func() {
		gcancel()
		if err := <-gwDone; err != nil {
			t.Errorf("gateway: %v\n%s", err, logs)
		}
	}()
	base := "http://" + gwAddr
	waitServing(t, base, logs)

	// The distiller accepts v1: the gateway loads it into the inference
	// server by name, from the shared directory.
	wt, adapterDir := installVersion(t, dir, "v1")
	appendPayload(t, st, events.VersionStream("v1"), wt)
	waitCond(t, ctx, 20*time.Second, "the gateway serving citizen@v1", func() bool {
		req, _ := http.NewRequest("GET", base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), `"citizen@v1"`)
	})
	abs, _ := filepath.Abs(adapterDir)
	tp.mu.Lock()
	loads := slices.Clone(tp.loads)
	tp.mu.Unlock()
	if len(loads) != 1 || loads[0]["lora_name"] != "v1" || loads[0]["lora_path"] != abs {
		t.Fatalf("load_lora_adapter calls: %v, want v1 at %s", loads, abs)
	}
	var models struct {
		Data []struct{ ID, Root string }
	}
	getJSON(t, "http://"+infAddr+"/v1/models", &models)
	if len(models.Data) != 2 || models.Data[1].ID != "v1" || models.Data[1].Root != abs {
		t.Fatalf("inference server's models: %+v", models)
	}

	// check asserts that interaction id was answered by version through
	// the upstream model name want, and recorded exactly as answered.
	check := func(id, version, want string) []float32 {
		t.Helper()
		up := tp.lastChat()
		if up.req["model"] != want || up.req["return_token_ids"] != true {
			t.Fatalf("upstream request: %v, want model %s with return_token_ids", up.req, want)
		}
		prompt, ids, lps := upstreamTokens(t, up.resp)
		iid, _ := strings.CutPrefix(id, "chatcmpl-")
		evs, err := st.ReadStream(ctx, "interaction-"+iid, 0, events.Forward, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("record of %s: %v %d", id, err, len(evs))
		}
		p, err := events.Decode(&evs[0])
		if err != nil {
			t.Fatal(err)
		}
		rec := p.(*events.InteractionRecorded)
		var recLP []float32
		for _, l := range rec.Choices[0].Logprobs {
			recLP = append(recLP, l.Logprob)
		}
		if rec.ModelVersion != version || rec.Engine != "upstream" || len(ids) == 0 || !reflect.DeepEqual(rec.PromptTokens, prompt) ||
			!reflect.DeepEqual(rec.Choices[0].CompletionTokens, ids) || !reflect.DeepEqual(recLP, lps) {
			t.Fatalf("recorded %s: version %s engine %s prompt %v tokens %v logprobs %v;\nupstream answered prompt %v tokens %v logprobs %v",
				id, rec.ModelVersion, rec.Engine, rec.PromptTokens, rec.Choices[0].CompletionTokens, recLP, prompt, ids, lps)
		}
		return lps
	}
	ask := func(model, conversation string, stream bool) (string, string) {
		t.Helper()
		code, body := post(t, base+"/v1/chat/completions", fmt.Sprintf(
			`{"model": %q, "messages": [{"role": "user", "content": "What is 2+3?"}], "max_tokens": 12, "stream": %v, "metadata": {"conversation_id": %q}}`,
			model, stream, conversation))
		if code != 200 {
			t.Fatalf("completion: %d %s\n%s", code, body, logs)
		}
		var out struct{ ID, Model string }
		if stream {
			first, _, _ := strings.Cut(strings.TrimPrefix(string(body), "data: "), "\n")
			json.Unmarshal([]byte(first), &out)
		} else {
			json.Unmarshal(body, &out)
		}
		return out.ID, out.Model
	}
	id, m := ask("citizen", "c-base", false)
	if m != "citizen@base" {
		t.Fatalf("stable answered as %s", m)
	}
	baseLP := check(id, "base", "tiny")
	id, m = ask("citizen@v1", "c-pinned", false)
	if m != "citizen@v1" {
		t.Fatalf("pinned v1 answered as %s", m)
	}
	if v1LP := check(id, "v1", "v1"); reflect.DeepEqual(v1LP, baseLP) {
		t.Fatal("v1's logprobs are the base's: the adapter was not applied upstream")
	}

	// The canary: a rollout of v1 to every new conversation.
	appendPayload(t, st, events.RolloutStream("r1"), &events.RolloutStarted{RolloutChange: events.RolloutChange{
		RolloutID: "r1", Candidate: "v1", Stable: "base", Weight: 1, Actor: "operator"}})
	n := 0
	waitCond(t, ctx, 20*time.Second, "the canary routing to v1", func() bool {
		n++
		id, m = ask("citizen", fmt.Sprintf("c-canary-%d", n), true)
		return m == "citizen@v1"
	})
	check(id, "v1", "v1")

	// A version whose artifact fails its checksum never reaches the
	// server: its parent answers for it, and version.unavailable says so.
	bad := *wt
	bad.Version, bad.Artifact = "v2", &events.Artifact{Format: "peft-lora", Path: wt.Artifact.Path, SHA256: strings.Repeat("0", 64)}
	appendPayload(t, st, events.VersionStream("v2"), &bad)
	waitCond(t, ctx, 20*time.Second, "version.unavailable for v2", func() bool {
		evs, err := st.ReadStream(ctx, events.VersionStream("v2"), 0, events.Forward, 10)
		return err == nil && len(evs) == 2 && evs[1].Type == events.TypeVersionUnavailable
	})
	if _, m := ask("citizen@v2", "c-v2", false); m != "citizen@base" {
		t.Fatalf("v2 answered as %s, want its parent", m)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if len(tp.loads) != 1 {
		t.Fatalf("load_lora_adapter calls: %v", tp.loads)
	}
}

// The inference server is a tier of its own: target all leaves it out,
// and it needs no other module (it opens no store).
func TestInferenceTarget(t *testing.T) {
	m := modules.New(quiet(), (&App{}).Modules()...)
	all, err := m.Order([]string{"all"})
	if err != nil || slices.Contains(all, "inference") || !modules.CoversAll((&App{}).Modules(), all) {
		t.Fatalf("all: %v %v", all, err)
	}
	only, err := m.Order([]string{"inference"})
	if err != nil || !reflect.DeepEqual(only, []string{"inference"}) {
		t.Fatalf("inference: %v %v", only, err)
	}
	with, _ := m.Order([]string{"all", "inference"})
	if !modules.CoversAll((&App{}).Modules(), with) || !slices.Contains(with, "inference") {
		t.Fatalf("all,inference: %v", with)
	}
}
