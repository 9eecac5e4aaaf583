package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"citizen/events"
)

// votingUpstream is a fake OpenAI-compatible server whose answer depends
// on the request's seed (the vote): answers[seed] is the content, or
// "HTTP500" for a failed request. It records each request.
type votingUpstream struct {
	t       *testing.T
	answers map[int]string
	mu      sync.Mutex
	reqs    []map[string]any
}

func (f *votingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		f.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	seed, _ := req["seed"].(float64)
	content, ok := f.answers[int(seed)]
	if !ok || content == "HTTP500" {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"boom"}}`)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}}}})
}

func answerJSON(pol float64, corr string, conf float64) string {
	b, _ := json.Marshal(map[string]any{"polarity": pol, "strength": 0.8, "aspects": []string{"correctness"}, "correction": corr, "hint": "", "confidence": conf})
	return string(b)
}

func newJudgeTest(t *testing.T, answers map[int]string) (*Judge, *votingUpstream) {
	t.Helper()
	f := &votingUpstream{t: t, answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	l, err := NewLLM(LLMConfig{BaseURL: srv.URL, Model: "judge-7b"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJudge(JudgeConfig{LLM: l, Votes: 3})
	if err != nil {
		t.Fatal(err)
	}
	return j, f
}

var judgeCorrection = Input{Text: "No, it's 60 days.", AnswerText: "You can return items within 30 days of delivery.", PromptText: "How long do I have to return an item?"}

func TestJudgeAgreesWithEmbedded(t *testing.T) {
	ref, _ := NewEmbedded().Interpret(context.Background(), judgeCorrection)
	if ref.Correction != "60 days" || ref.Polarity >= 0 {
		t.Fatalf("embedded reading %+v: the test needs a clear correction", ref)
	}
	j, f := newJudgeTest(t, map[int]string{1: answerJSON(-0.9, "60 days", 0.9), 2: answerJSON(-0.7, "60 days", 0.8), 3: answerJSON(-0.8, "60 Days.", 0.7)})
	got, err := j.Interpret(context.Background(), judgeCorrection)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Agreement
	if a == nil || a.Votes != 3 || a.Valid != 3 || a.Share != 1 || !a.Polarity || !a.Correction || a.Reference != EmbeddedVersion ||
		a.ReferenceCorrection != "60 days" {
		t.Fatalf("agreement %+v", a)
	}
	if got.Polarity >= 0 || NormalizeCorrection(got.Correction) != "60 days" || got.Uncertain || got.Confidence < ref.Confidence ||
		got.Version != "llm-3(judge-7b)+"+EmbeddedVersion {
		t.Errorf("got %+v", got)
	}
	// three requests, each a vote with its own seed at the vote
	// temperature, carrying the rubric, the question and the answer
	if len(f.reqs) != 3 {
		t.Fatalf("%d requests", len(f.reqs))
	}
	seeds := map[float64]bool{}
	for _, r := range f.reqs {
		seeds[r["seed"].(float64)] = true
		if r["temperature"] != 0.7 {
			t.Errorf("temperature %v", r["temperature"])
		}
		msgs := r["messages"].([]any)
		sys := msgs[0].(map[string]any)["content"].(string)
		user := msgs[1].(map[string]any)["content"].(string)
		if !strings.Contains(sys, "Praise plus a correction is -1") || !strings.Contains(user, "within 30 days") || !strings.Contains(user, "return an item") {
			t.Errorf("request messages %v", msgs)
		}
	}
	if len(seeds) != 3 {
		t.Errorf("seeds %v", seeds)
	}
}

func TestJudgeMajorityAndDisagreement(t *testing.T) {
	praise := Input{Text: "Perfect, thanks a lot!", AnswerText: "You can return items within 30 days of delivery."}
	ref, _ := NewEmbedded().Interpret(context.Background(), praise)
	if ref.Polarity <= 0 {
		t.Fatalf("embedded reading %+v: the test needs clear praise", ref)
	}
	// two of three votes: praise; the third a correction
	j, _ := newJudgeTest(t, map[int]string{1: answerJSON(0.9, "", 0.9), 2: answerJSON(-0.8, "45 days", 0.9), 3: answerJSON(0.8, "", 0.9)})
	got, err := j.Interpret(context.Background(), praise)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Agreement; a == nil || a.Valid != 3 || math2(a.Share) != 0.67 || !a.Polarity || !a.Correction {
		t.Fatalf("agreement %+v", got.Agreement)
	}
	if got.Polarity <= 0 || got.Correction != "" {
		t.Errorf("majority: got %+v", got)
	}

	// unanimous votes for another correction than the embedded one's:
	// the confident reference's reading stands, marked uncertain
	j, _ = newJudgeTest(t, map[int]string{1: answerJSON(-0.9, "90 days", 0.9), 2: answerJSON(-0.9, "90 days", 0.9), 3: answerJSON(-0.9, "90 days", 0.9)})
	got, err = j.Interpret(context.Background(), judgeCorrection)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Agreement; a == nil || !a.Polarity || a.Correction || a.Share != 1 {
		t.Fatalf("agreement %+v", got.Agreement)
	}
	if !got.Uncertain || (got.Correction != "60 days" && got.Correction != "90 days") {
		t.Errorf("disagreement: got %+v", got)
	}
}

func math2(x float64) float64 { return float64(int(x*100+0.5)) / 100 }

func TestJudgeFailedVotes(t *testing.T) {
	// one usable vote, one unparsable, one HTTP error
	j, _ := newJudgeTest(t, map[int]string{1: answerJSON(-0.9, "60 days", 0.9), 2: "not json", 3: "HTTP500"})
	got, err := j.Interpret(context.Background(), judgeCorrection)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Agreement; a == nil || a.Votes != 3 || a.Valid != 1 {
		t.Fatalf("agreement %+v", got.Agreement)
	}
	// no usable vote: the reference's reading, noted
	j, _ = newJudgeTest(t, map[int]string{1: "not json", 2: "HTTP500", 3: "{}"})
	got, err = j.Interpret(context.Background(), judgeCorrection)
	if err != nil {
		t.Fatal(err)
	}
	if got.Note != "unparsable" || got.Correction != "60 days" || got.Agreement == nil || got.Agreement.Valid != 0 {
		t.Errorf("got %+v", got)
	}
	// every request failed: an upstream error
	j, _ = newJudgeTest(t, map[int]string{})
	if _, err := j.Interpret(context.Background(), judgeCorrection); !errors.Is(err, ErrUpstream) {
		t.Errorf("err %v, want ErrUpstream", err)
	}
}

func TestIngesterRecordsAgreement(t *testing.T) {
	j, _ := newJudgeTest(t, map[int]string{1: answerJSON(-0.9, "60 days", 0.9), 2: answerJSON(-0.9, "60 days", 0.9), 3: answerJSON(0.5, "", 0.6)})
	in := NewIngester(IngesterConfig{Interpreter: j}, nil)
	out, err := in.Handle(context.Background(), feedbackEvent(t, events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Source: "customer", Text: "no - it's 60 days now"}))
	if err != nil || len(out) != 1 {
		t.Fatalf("%v, %d events", err, len(out))
	}
	p, err := events.Decode(&out[0])
	if err != nil {
		t.Fatal(err)
	}
	fi := p.(*events.FeedbackInterpreted)
	if fi.Agreement == nil || fi.Agreement.Votes != 3 || fi.Agreement.Valid != 3 || !strings.HasPrefix(fi.InterpreterVersion, "llm-3(judge-7b)+") ||
		fi.Agreement.Reference != EmbeddedVersion {
		t.Errorf("payload %+v (agreement %+v)", fi, fi.Agreement)
	}
	// the embedded interpreter records none
	plain, _ := NewIngester(IngesterConfig{}, nil).Handle(context.Background(), feedbackEvent(t, events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Text: "thanks"}))
	if strings.Contains(string(plain[0].Data), "agreement") {
		t.Errorf("embedded interpretation carries an agreement: %s", plain[0].Data)
	}
}

func TestNewInterpreterConfig(t *testing.T) {
	in, err := NewInterpreter(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := in.(*Embedded); !ok {
		t.Errorf("default interpreter %T, want *Embedded", in)
	}
	cfg := DefaultConfig()
	cfg.Judge.BaseURL, cfg.Judge.Model = "http://127.0.0.1:9", "m"
	in, err = NewInterpreter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := in.(*Judge); !ok {
		t.Errorf("configured interpreter %T, want *Judge", in)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Judge.Model = "m" },
		func(c *Config) { c.Judge.BaseURL = "http://x" },
		func(c *Config) { c.Judge.BaseURL, c.Judge.Model, c.Judge.Votes = "http://x", "m", 0 },
		func(c *Config) { c.Judge.BaseURL, c.Judge.Model, c.Judge.Temperature = "http://x", "m", 3 },
		func(c *Config) { c.Judge.BaseURL, c.Judge.Model = "ftp://x", "m" },
	} {
		c := DefaultConfig()
		bad(&c)
		if _, err := NewInterpreter(c); err == nil {
			t.Errorf("NewInterpreter(%+v) accepted", c.Judge)
		}
	}
}
