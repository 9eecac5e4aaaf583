package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeUpstream answers chat completions with content and records requests.
type fakeUpstream struct {
	t       *testing.T
	status  int
	content string
	raw     string // whole body, overrides content
	calls   atomic.Int32
	lastReq map[string]any
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		f.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer k3y" {
		f.t.Errorf("Authorization %q", got)
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	f.lastReq = req
	if f.status != 0 {
		w.WriteHeader(f.status)
		io.WriteString(w, `{"error":{"message":"boom"}}`)
		return
	}
	if f.raw != "" {
		io.WriteString(w, f.raw)
		return
	}
	resp := map[string]any{"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": f.content}}}}
	json.NewEncoder(w).Encode(resp)
}

func newLLMTest(t *testing.T, f *fakeUpstream, base string) *LLM {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	l, err := NewLLM(LLMConfig{BaseURL: srv.URL + base, APIKey: "k3y", Model: "judge-7b"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLLMValidAnswer(t *testing.T) {
	for _, base := range []string{"", "/v1", "/v1/"} {
		f := &fakeUpstream{t: t, content: `{"polarity":-0.8,"strength":0.7,"aspects":["length","correctness","correctness"],"correction":"60 days","hint":"The refund window is now 60 days.","confidence":0.9}`}
		l := newLLMTest(t, f, base)
		got, err := l.Interpret(context.Background(), Input{Text: "no - it's 60 days now", Rating: ptr(2), AnswerText: "30 days"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Polarity != -0.8 || got.Strength != 0.7 || got.Correction != "60 days" || got.Confidence != 0.9 ||
			strings.Join(got.Aspects, ",") != "correctness,length" || got.Hint != "The refund window is now 60 days." ||
			got.Version != "llm-3(judge-7b)" || got.Note != "" {
			t.Errorf("got %+v", got)
		}
		// the request asks for the schema and carries the feedback
		rf, _ := f.lastReq["response_format"].(map[string]any)
		if rf["type"] != "json_schema" {
			t.Errorf("response_format %v", rf)
		}
		js, _ := rf["json_schema"].(map[string]any)
		if js["strict"] != true || js["schema"] == nil {
			t.Errorf("json_schema %v", js)
		}
		if f.lastReq["model"] != "judge-7b" {
			t.Errorf("model %v", f.lastReq["model"])
		}
		msgs, _ := f.lastReq["messages"].([]any)
		if len(msgs) != 2 || !strings.Contains(msgs[1].(map[string]any)["content"].(string), "60 days now") {
			t.Errorf("messages %v", msgs)
		}
	}
}

func TestLLMUnparsable(t *testing.T) {
	bad := map[string]string{
		"not json":        `The customer is unhappy.`,
		"fenced":          "```json\n{\"polarity\":0}\n```",
		"missing field":   `{"polarity":-0.5,"strength":0.5,"aspects":[],"correction":"","confidence":0.5}`,
		"unknown field":   `{"polarity":-0.5,"strength":0.5,"aspects":[],"correction":"","hint":"","confidence":0.5,"mood":"sad"}`,
		"out of range":    `{"polarity":-1.5,"strength":0.5,"aspects":[],"correction":"","hint":"","confidence":0.5}`,
		"bad aspect":      `{"polarity":-0.5,"strength":0.5,"aspects":["vibes"],"correction":"","hint":"","confidence":0.5}`,
		"wrong type":      `{"polarity":"-0.5","strength":0.5,"aspects":[],"correction":"","hint":"","confidence":0.5}`,
		"trailing data":   `{"polarity":-0.5,"strength":0.5,"aspects":[],"correction":"","hint":"","confidence":0.5} {}`,
		"null field":      `{"polarity":null,"strength":0.5,"aspects":[],"correction":"","hint":"","confidence":0.5}`,
		"huge correction": `{"polarity":-0.5,"strength":0.5,"aspects":[],"correction":"` + strings.Repeat("x", 2000) + `","hint":"","confidence":0.5}`,
	}
	for name, content := range bad {
		t.Run(name, func(t *testing.T) {
			l := newLLMTest(t, &fakeUpstream{t: t, content: content}, "")
			got, err := l.Interpret(context.Background(), Input{Text: "meh"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Note != "unparsable" || got.Polarity != 0 || got.Confidence > 0.1 || got.Version != "llm-3(judge-7b)" {
				t.Errorf("got %+v", got)
			}
		})
	}
	for name, raw := range map[string]string{"no choices": `{"choices":[]}`, "not json": `<html>`, "refusal": `{"choices":[{"message":{"content":"","refusal":"I can't"}}]}`} {
		t.Run(name, func(t *testing.T) {
			l := newLLMTest(t, &fakeUpstream{t: t, raw: raw}, "")
			got, err := l.Interpret(context.Background(), Input{Text: "meh"})
			if err != nil || got.Note != "unparsable" {
				t.Errorf("got %+v, %v", got, err)
			}
		})
	}
}

func TestLLMUpstreamError(t *testing.T) {
	l := newLLMTest(t, &fakeUpstream{t: t, status: http.StatusServiceUnavailable}, "")
	_, err := l.Interpret(context.Background(), Input{Text: "wrong"})
	if !errors.Is(err, ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
	// unreachable
	l2, _ := NewLLM(LLMConfig{BaseURL: "http://127.0.0.1:1", Model: "m"})
	if _, err := l2.Interpret(context.Background(), Input{Text: "wrong"}); !errors.Is(err, ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
}

func TestLLMBadInputNotSent(t *testing.T) {
	f := &fakeUpstream{t: t, content: `{}`}
	l := newLLMTest(t, f, "")
	for _, text := range []string{"", "\x00\x01\x02", strings.Repeat("a", MaxTextBytes+1)} {
		got, err := l.Interpret(context.Background(), Input{Text: text, Rating: ptr(1)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Polarity != -1 || got.Version != "llm-3(judge-7b)+"+EmbeddedVersion {
			t.Errorf("got %+v", got)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("upstream called %d times for bad input", n)
	}
}

func TestNewLLMValidates(t *testing.T) {
	for _, cfg := range []LLMConfig{{BaseURL: "ftp://x", Model: "m"}, {BaseURL: "http://x"}, {}} {
		if _, err := NewLLM(cfg); err == nil {
			t.Errorf("NewLLM(%+v) accepted", cfg)
		}
	}
}

// The rubric lists every canonical status of statuses.txt, in its order,
// and leaves no placeholder.
func TestLLMPromptListsStatuses(t *testing.T) {
	p := llmSystemPrompt()
	if strings.Contains(p, "{statuses}") || len(statusCanon) < 10 {
		t.Fatalf("placeholder left or %d statuses", len(statusCanon))
	}
	if !strings.Contains(p, "statuses from: "+strings.Join(statusCanon, ", ")+"; names as") {
		t.Errorf("the rubric does not list the statuses %q", statusCanon)
	}
	for _, c := range statusCanon {
		if statusFamily[c] == "" {
			t.Errorf("status %q has no family", c)
		}
	}
}
