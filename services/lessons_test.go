package services

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/gateway"
)

// TestLessonsEndToEnd: two customers correct the same stale answer in
// their own words; the feedback ingester interprets the comments, the
// learner promotes a lesson, and seconds later a third customer asking a
// paraphrase gets the corrected answer (the first draft stated what the
// lesson corrects, so the gateway answered again with it in the context).
// The record names the lesson and keeps the client's messages; the stale
// answer's evaluation is graded against the lesson's value.
func TestLessonsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a whole citizen")
	}
	eng := &scriptedEngine{policy: func(_ *rand.Rand, msgs []gateway.Message) gateway.ChoiceResult {
		if len(msgs) > 0 && msgs[0].Role == "system" && strings.Contains(msgs[0].Content, "60 days") {
			return gateway.ChoiceResult{Content: "The refund window is 60 days."}
		}
		return gateway.ChoiceResult{Content: "The refund window is 30 days."}
	}}
	c := startStoryCitizen(t, eng)
	ask := func(user, q string) (id, answer string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "citizen", "user": user, "metadata": map[string]string{"task_type": "policy"},
			"messages": []map[string]string{{"role": "user", "content": q}}})
		req, _ := http.NewRequest("POST", c.base+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			ID      string `json:"id"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		return out.ID, out.Choices[0].Message.Content
	}
	feedback := func(id, user, text string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"text": text, "user": user})
		req, _ := http.NewRequest("POST", c.base+"/v1/chat/completions/"+id+"/feedback", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("feedback: %d", resp.StatusCode)
		}
	}
	first, _ := ask("u1", "What is your refund window?")
	feedback(first, "u1", "That's wrong, the answer is 60 days.")
	second, _ := ask("u2", "How long do I have to ask for a refund?")
	feedback(second, "u2", "No - it's 60 days now.")
	deadline := time.Now().Add(20 * time.Second)
	for len(readEvents(t, c.store, events.TypeLessonPromoted)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no lesson promoted; interpretations %d, proposals %d; logs:\n%s",
				len(readEvents(t, c.store, events.TypeFeedbackInterpreted)), len(readEvents(t, c.store, events.TypeLessonProposed)), c.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The gateway's view follows the store: the next answers use it.
	var third, answer string
	for {
		third, answer = ask("u3", "What's the deadline for returns?")
		if strings.Contains(answer, "60 days") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third customer still got %q", answer)
		}
		time.Sleep(50 * time.Millisecond)
	}
	iid := strings.TrimPrefix(third, "chatcmpl-")
	evs, err := c.store.ReadStream(t.Context(), events.InteractionStream(iid), 0, events.Forward, 10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := events.Decode(&evs[0])
	if err != nil {
		t.Fatal(err)
	}
	rec := p.(*events.InteractionRecorded)
	if len(rec.Lessons) != 1 || len(rec.Messages) != 1 || rec.Messages[0].Role != "user" {
		t.Fatalf("recorded lessons %+v, messages %+v", rec.Lessons, rec.Messages)
	}
	// A streamed answer is not revised: its stale answer is graded
	// against the lesson's value (reflection's reference check).
	body, _ := json.Marshal(map[string]any{"model": "citizen", "user": "u4", "stream": true, "metadata": map[string]string{"task_type": "policy"},
		"messages": []map[string]string{{"role": "user", "content": "What is your refund window?"}}})
	req, _ := http.NewRequest("POST", c.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-citizen-dev")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		ev := latestEvaluations(t, c.store)
		e3, ok3 := ev[iid]
		var staleEval *events.InteractionEvaluated
		for id, e := range ev {
			if id != iid && e.User == "u4" {
				e := e
				staleEval = &e
			}
		}
		if ok3 && staleEval != nil {
			if len(e3.Lessons) != 1 {
				t.Fatalf("the third interaction's evaluation names lessons %v", e3.Lessons)
			}
			ref := false
			for _, ch := range staleEval.Checks {
				ref = ref || ch.Name == "reference" && ch.Label == rec.Lessons[0].ID
			}
			if !ref {
				t.Fatalf("the stale streamed answer was not graded against the lesson: %+v", staleEval)
			}
			retireAndForget(t, c, rec.Lessons[0].ID, ask)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("evaluations missing: third %v, stale %v", ok3, staleEval != nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// retireAndForget: the operator sees the lesson, retires it, and answers
// are the model's own again.
func retireAndForget(t *testing.T, c *storyCitizen, id string, ask func(user, q string) (string, string)) {
	t.Helper()
	do := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, c.base+path, nil)
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := do("GET", "/v1/ops/lessons?state=promoted"); code != 200 || !strings.Contains(body, id) {
		t.Fatalf("lessons list: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/ops/lessons/"+id+"/retire"); code != 200 {
		t.Fatalf("retire: %d %s", code, body)
	}
	if code, _ := do("POST", "/v1/ops/lessons/"+id+"/retire"); code != 409 {
		t.Fatalf("retiring twice: %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, answer := ask("u5", "What's the deadline for returns?"); strings.Contains(answer, "30 days") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the retired lesson still changes answers")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
