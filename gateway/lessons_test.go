package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"citizen/events"
)

// fakeLessons answers every query about question q with ls and remembers
// the queries.
type fakeLessons struct {
	q   string
	ls  []events.AppliedLesson
	err error
	// revise: answers that show the lessons in reviseLs apply.
	revise   string
	reviseLs []events.AppliedLesson

	mu   sync.Mutex
	seen []LessonQuery
}

func (f *fakeLessons) Applicable(_ context.Context, q LessonQuery) ([]events.AppliedLesson, error) {
	f.mu.Lock()
	f.seen = append(f.seen, q)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if q.Question == f.q {
		return f.ls, nil
	}
	return nil, nil
}

func (f *fakeLessons) Revise(_ context.Context, q LessonQuery, answer string) ([]events.AppliedLesson, error) {
	if f.err != nil {
		return nil, f.err
	}
	if f.revise != "" && answer == f.revise {
		return f.reviseLs, nil
	}
	return nil, nil
}

// An answer that states what a lesson corrects is given again with the
// lesson in the context; the record holds the second answer and the
// lesson. Streaming answers are not revised.
func TestAnswerIsRevisedWithLessons(t *testing.T) {
	src := &fakeLessons{revise: "30 days", reviseLs: []events.AppliedLesson{{ID: "l1", Statement: "The right answer is 60 days."}}}
	e := newEnv(t, func(_ *Config, d *Deps) { d.Lessons = src })
	e.stub.Reply = func(req *GenerateRequest, _ int) string {
		if len(req.Messages) > 0 && req.Messages[0].Role == "system" && strings.Contains(req.Messages[0].Content, "60 days") {
			return "60 days"
		}
		return "30 days"
	}
	body := map[string]any{"model": "citizen", "messages": userMsg("What is your refund window?")}
	resp, b := e.post("/v1/chat/completions", keyA, body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"60 days"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	rec := e.interactions()[0]
	if len(rec.Lessons) != 1 || rec.Lessons[0].ID != "l1" || rec.Choices[0].Message.Content != "60 days" || len(rec.Messages) != 1 {
		t.Fatalf("recorded %+v", rec)
	}
	body["stream"] = true
	resp, b = e.post("/v1/chat/completions", keyA, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	if rec := e.interactions()[1]; rec.Choices[0].Message.Content != "30 days" || rec.Lessons != nil {
		t.Fatalf("a streamed answer was revised: %+v", rec)
	}
}

func TestLessonsEnterTheContextAndTheRecord(t *testing.T) {
	src := &fakeLessons{q: "What is your refund window?", ls: []events.AppliedLesson{{ID: "l1", Statement: "The right answer is 60 days."}}}
	var mu sync.Mutex
	var got []Message
	e := newEnv(t, func(_ *Config, d *Deps) { d.Lessons = src })
	e.stub.Reply = func(req *GenerateRequest, _ int) string {
		mu.Lock()
		got = append([]Message(nil), req.Messages...)
		mu.Unlock()
		return "ok"
	}
	for _, stream := range []bool{false, true} {
		body := map[string]any{"model": "citizen", "stream": stream, "user": "u1", "metadata": map[string]string{"task_type": "policy"},
			"messages": []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is your refund window?"}}}
		resp, b := e.post("/v1/chat/completions", keyA, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, b)
		}
		mu.Lock()
		if len(got) != 2 || got[0].Role != "system" || got[0].Content != "Be brief.\n\n"+events.LessonsHeading+"\n- The right answer is 60 days." {
			t.Fatalf("stream=%v: the engine got %+v", stream, got)
		}
		mu.Unlock()
	}
	recs := e.interactions()
	if len(recs) != 2 {
		t.Fatalf("recorded %d", len(recs))
	}
	for _, rec := range recs {
		if len(rec.Lessons) != 1 || rec.Lessons[0].ID != "l1" {
			t.Fatalf("recorded lessons %+v", rec.Lessons)
		}
		if rec.Messages[0].Content != "Be brief." {
			t.Fatalf("recorded messages are not the client's: %+v", rec.Messages)
		}
		ctxMsgs := rec.ContextMessages()
		if ctxMsgs[0].Content != got[0].Content {
			t.Fatalf("ContextMessages %q, the engine got %q", ctxMsgs[0].Content, got[0].Content)
		}
	}
	src.mu.Lock()
	q := src.seen[0]
	src.mu.Unlock()
	if q.Tenant == "" || q.User != "u1" || q.TaskType != "policy" {
		t.Fatalf("query %+v", q)
	}
}

func TestNoLessonsLeavesTheRequestAlone(t *testing.T) {
	src := &fakeLessons{q: "something else"}
	e := newEnv(t, func(_ *Config, d *Deps) { d.Lessons = src })
	resp, b := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hello")})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "echo: hello") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if rec := e.interactions()[0]; rec.Lessons != nil || len(rec.Messages) != 1 {
		t.Fatalf("recorded %+v", rec)
	}
}

func TestFailingLessonSourceStillAnswers(t *testing.T) {
	src := &fakeLessons{err: errors.New("index down")}
	e := newEnv(t, func(_ *Config, d *Deps) { d.Lessons = src })
	resp, b := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hello")})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
