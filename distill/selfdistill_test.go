package distill

import (
	"context"
	"slices"
	"testing"

	"citizen/events"
)

func TestSelfDistillationTeacherSeesNoteStudentDoesNot(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	var hinted []string
	for i := 0; i < 12; i++ {
		q := oldWorld(i*4 + 2) // order_status
		id := w.recordQA(tok, base, q.typ, q.user, "Order is lost.")
		w.evaluate(id, q.typ, 1, -1, true)
		if i%2 == 0 {
			w.feedback(id, "", "check the tracking page")
			hinted = append(hinted, id)
		} else {
			w.feedback(id, "shipped yesterday", "") // a correction the tiny teacher will not say
		}
	}
	var asked []string
	d := newDistiller(t, w, func(c *Config) {
		c.Objective = Objective{PolicyGradient: true, SelfDistill: true} // no correction fallback
		c.Revise = func(ex Example, answer string) (bool, bool) {
			if answer == ex.Answer.Content {
				return true, true // the recorded answer: it checks this shape of answer
			}
			asked = append(asked, ex.Interaction)
			return ex.Interaction != hinted[0], true // the grader rejects one revision
		}
	})
	catchUp(t, d, w.store)
	ds, before := revisedDataset(t, d)
	var revised []Example
	for _, ex := range ds.Train[before:] {
		revised = append(revised, ex)
	}
	if len(revised) != len(hinted)-1 {
		t.Fatalf("%d revised examples, want %d (hints kept unless the grader rejects; corrections the teacher did not state dropped)", len(revised), len(hinted)-1)
	}
	if len(asked) != len(hinted) {
		t.Fatalf("grader asked about %v", asked)
	}
	policy := map[string]Example{}
	for _, ex := range ds.Train[:before] {
		policy[ex.Interaction] = ex
	}
	for _, r := range revised {
		p := policy[r.Interaction]
		if r.Kind != KindRevised || r.Weight <= 0 || r.Interaction == hinted[0] || r.Hint == "" {
			t.Fatalf("revised %+v", r)
		}
		// The student's prompt is the original one, without the note.
		if !slices.Equal(r.PromptTokens, p.PromptTokens) {
			t.Fatal("student prompt differs from the recorded prompt")
		}
		// The completion is what the teacher (with the note) generated.
		msgs := append([]events.ChatMessage{{Role: "system", Content: "Note: " + r.Hint}}, r.Messages...)
		c, err := d.cfg.Chat.Complete(context.Background(), chatRequest(msgs, d.cfg.TeacherMaxTokens))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.IDs(); !slices.Equal(got, r.CompletionTokens) {
			t.Fatalf("revised completion %v, teacher said %v", r.CompletionTokens, got)
		}
	}
	// With the fallback on, the correction itself is learnt instead.
	d.cfg.Objective.CorrectionFallback = true
	d.cfg.Revise = nil
	ds2, before := revisedDataset(t, d)
	fallback := 0
	for _, ex := range ds2.Train[before:] {
		if ex.Correction != "" {
			fallback++
			want, _ := answerTokens(tok, ex.Messages, "The refund window is shipped yesterday.")
			if !slices.Equal(ex.CompletionTokens, want) {
				t.Fatal("fallback target is not the rendered correction")
			}
		}
	}
	if fallback != len(hinted) {
		t.Fatalf("%d correction fallbacks, want %d", fallback, len(hinted))
	}
}

func revisedDataset(t *testing.T, d *Distiller) (*Dataset, int) {
	t.Helper()
	ds, err := BuildDataset(context.Background(), d.proj.Snapshot(), 0, d.proj.Position(), PipelineConfig{HoldOutFraction: -1, MinHoldOutPerType: -1})
	if err != nil {
		t.Fatal(err)
	}
	before := len(ds.Train)
	if err := d.corrections(context.Background(), d.log, ds, nil, 0); err != nil {
		t.Fatal(err)
	}
	return ds, before
}
