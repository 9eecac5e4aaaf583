package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"citizen/events"
)

// TestOpenAISDK runs gateway/sdktest/run.mjs (the official openai npm
// package) against a live gateway with the stub engine and the memstore,
// then checks that every completion the SDK got is recorded with exact
// token ids and logprobs. Without node it skips, except under CI=true where
// it fails.
func TestOpenAISDK(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	node, err := exec.LookPath("node")
	if err != nil {
		if ci {
			t.Fatal("CI=true but node is not installed: the OpenAI SDK test needs node and npm")
		}
		t.Skip("node not installed")
	}
	dir, _ := filepath.Abs("sdktest")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			if ci {
				t.Fatal("CI=true, gateway/sdktest/node_modules is missing and npm is not installed")
			}
			t.Skip("npm not installed and gateway/sdktest/node_modules missing")
		}
		cmd := exec.Command(npm, "ci", "--prefer-offline", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s failed: %v\n%s", dir, err, out)
		}
	}

	const bodyLimit = 256 << 10
	e := newEnv(t, func(c *Config, d *Deps) { c.MaxBodyBytes = bodyLimit; d.Embedder = lenEmbedder{} })
	e.keys.Add("sk-sdk-limited", KeySpec{Tenant: "tenant-a", RequestsPerMinute: 1})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_test/fail", func(w http.ResponseWriter, r *http.Request) {
		k, _ := strconv.Atoi(r.URL.Query().Get("k"))
		st, _ := strconv.Atoi(r.URL.Query().Get("status"))
		ms, _ := strconv.Atoi(r.URL.Query().Get("retry_ms"))
		e.stub.FailNext(k, &EngineError{Status: st, Message: "scripted failure", RetryAfter: time.Duration(ms) * time.Millisecond})
		fmt.Fprint(w, `{}`)
	})
	mux.HandleFunc("POST /_test/calls", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"calls":%d}`, e.stub.Calls())
	})
	mux.Handle("/", e.srv.Handler())
	ts := httptest.NewServer(mux)
	defer ts.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "run.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CITIZEN_BASE_URL="+ts.URL, "CITIZEN_API_KEY="+keyA, "CITIZEN_LIMITED_KEY=sk-sdk-limited",
		"CITIZEN_CONTROL_URL="+ts.URL+"/_test", "CITIZEN_BODY_LIMIT="+strconv.Itoa(bodyLimit))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node run.mjs:\n%s", out.String())
	if err != nil {
		t.Fatalf("the SDK script failed: %v", err)
	}
	var acked []string
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "ACKED "); ok {
			if err := json.Unmarshal([]byte(rest), &acked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(acked) < 10 {
		t.Fatalf("only %d acknowledged completions reported", len(acked))
	}
	for _, id := range acked {
		iid, ok := InteractionID(id)
		if !ok {
			t.Fatalf("bad id %q", id)
		}
		_, rec := e.interaction(iid)
		for _, ch := range rec.Choices {
			text := ch.Message.Content
			for _, tc := range ch.Message.ToolCalls {
				text += tc.Name + tc.Arguments
			}
			if !reflect.DeepEqual(ch.CompletionTokens, codepoints(text)) || len(ch.Logprobs) != len(ch.CompletionTokens) {
				t.Fatalf("%s: tokens %v for %q", id, ch.CompletionTokens, ch.Message.Content)
			}
			for i, lp := range ch.Logprobs {
				if lp.Logprob != StubLogprob(i) || lp.Token != ch.CompletionTokens[i] {
					t.Fatalf("%s: logprob %d = %+v", id, i, lp)
				}
			}
		}
		msgs := make([]Message, len(rec.Messages))
		for i, m := range rec.Messages {
			msgs[i] = Message{Role: m.Role, Content: m.Content, ToolCalls: fromRecordCalls(m.ToolCalls)}
		}
		if !reflect.DeepEqual(rec.PromptTokens, StubPromptTokens(msgs)) {
			t.Fatalf("%s: prompt tokens differ", id)
		}
	}
}

// TestOpenAIPythonSDK runs gateway/sdktest/run.py (the official openai
// Python package) against a live gateway with the stub engine, a test
// embedder and the memstore: stored completions (store, update, delete),
// the Responses API and embeddings. It needs python3 with openai; without
// it the test skips, except with CITIZEN_PY_INTEROP=1 (set by
// scripts/test.sh once it installed the reference packages), where it
// fails.
func TestOpenAIPythonSDK(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import openai").Run()
	}
	if err != nil {
		if os.Getenv("CITIZEN_PY_INTEROP") == "1" {
			t.Fatalf("CITIZEN_PY_INTEROP=1 but python3 cannot import openai (pip install openai): %v", err)
		}
		t.Skip("python3 with the openai package not available")
	}
	e := newEnv(t, func(c *Config, d *Deps) { d.Embedder = lenEmbedder{} })
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "run.py")
	cmd.Dir = "sdktest"
	cmd.Env = append(os.Environ(), "CITIZEN_BASE_URL="+ts.URL, "CITIZEN_API_KEY="+keyA)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("python3 run.py:\n%s", out.String())
	if err != nil {
		t.Fatalf("the SDK script failed: %v", err)
	}
	var acked []string
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "ACKED "); ok {
			if err := json.Unmarshal([]byte(rest), &acked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(acked) < 8 {
		t.Fatalf("only %d acknowledged completions reported", len(acked))
	}
	for _, id := range acked {
		iid, ok := InteractionID(id)
		if !ok {
			t.Fatalf("bad id %q", id)
		}
		if _, rec := e.interaction(iid); len(rec.Choices) != 1 || len(rec.Choices[0].CompletionTokens) == 0 {
			t.Fatalf("%s: recorded %+v", id, rec)
		}
	}
}

func fromRecordCalls(calls []events.ToolCall) []ToolCall {
	var out []ToolCall
	for _, c := range calls {
		out = append(out, ToolCall(c))
	}
	return out
}
